"""The library stays readable: no function over 60 lines or with over 6 positional parameters, no line
over 120 characters, no block of six lines written twice (rl/, model/, configs/; the measuring tools
in rl/tools/ excepted), and no import cycle, with every import edge seen (package imports, and the
modules configs' scan for presets imports when it runs).
Run: python -m pytest tests/test_structure.py"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIBRARY = sorted(p for folder in ("rl", "model", "configs") for p in (REPO / folder).rglob("*.py")
                 if "tools" not in p.parts)


def functions(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_long_function_and_no_long_parameter_list():
    long, wide = [], []
    for path in LIBRARY:
        name = str(path.relative_to(REPO))
        for fn in functions(path):
            if fn.end_lineno - fn.lineno + 1 > 60:
                long.append(f"{name}:{fn.lineno} {fn.name} ({fn.end_lineno - fn.lineno + 1} lines)")
            positional = [a.arg for a in fn.args.posonlyargs + fn.args.args if a.arg not in ("self", "cls")]
            if len(positional) > 6:
                wide.append(f"{name}:{fn.lineno} {fn.name} ({len(positional)} positional)")
    assert long == [] and wide == []


def test_no_line_over_120_characters():
    over = [f"{p.relative_to(REPO)}:{i}" for p in LIBRARY for i, line in enumerate(p.read_text().splitlines(), 1)
            if len(line) > 120]
    assert over == []


def test_no_block_of_six_lines_written_twice():
    seen, twice = {}, []  # six stripped code lines -> (file, line) where they first stand
    for path in LIBRARY:
        name = str(path.relative_to(REPO))
        lines = [(i, line.strip()) for i, line in enumerate(path.read_text().splitlines(), 1)]
        code = [(i, s) for i, s in lines if len(s) > 3 and not s.startswith(("#", '"""', "import ", "from "))]
        for k in range(len(code) - 5):
            block, here = tuple(s for _, s in code[k:k + 6]), (name, code[k][0])
            first = seen.setdefault(block, here)
            if first[0] != name or here[1] - first[1] >= 6:  # not the same lines seen through an overlapping window
                twice.append(f"{first[0]}:{first[1]} and {name}:{here[1]}")
    assert twice == []


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.fixture(scope="module")
def graph() -> dict:
    """{module: the project modules it imports}: `from rl import dist` is an edge to rl.dist, and
    configs' scan for presets adds an edge to every module it imports when it runs (read once for the
    tests below: the scan is a new interpreter's imports, 3 s)."""
    modules = {module_name(p) for p in LIBRARY}
    graph = {}
    for path in LIBRARY:
        imports = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imports.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                               for a in node.names)
            elif isinstance(node, ast.Import):
                imports.update(a.name for a in node.names)
        graph[module_name(path)] = {m for m in imports if m.split(".")[0] in ("rl", "model", "configs")}
    scanned = subprocess.run([sys.executable, "-c", "import sys, configs; configs.all_config_classes(); "
                              "print(' '.join(m for m in sys.modules if m.startswith('configs.')))"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    graph["configs"] |= set(scanned)
    return graph


def test_the_import_graph_sees_every_edge(graph):
    """The guard below sees what it guards: package imports and the presets scan."""
    assert "rl.dist" in graph["rl.math_trainer"] and "rl.seeding" in graph["rl.rollout"]
    assert "configs.adder" in graph["configs"] and "configs.cli" not in graph["configs"]


def test_the_error_types_are_a_leaf_and_the_run_lock_needs_no_config(graph):
    """rl/errors.py imports nothing of the project, so a module that only raises or catches one of its
    errors (the run lock, the run folder) need not import the config, the model or torch."""
    assert graph["rl.errors"] == set()
    assert not any(m.startswith(("configs", "model")) for m in graph["rl.run_control"] | graph["rl.run_dir"])


def test_only_the_entry_script_and_the_trainer_compose_the_settings(graph):
    """Every other library module reads a config through its fields (the measuring tools, entry points
    of their own, excepted), so the settings can change shape without touching them."""
    composers = {m for m, deps in graph.items() if m.split(".")[0] in ("rl", "model")
                 and any(d == "configs" or d.startswith("configs.") for d in deps)}
    assert composers <= {"rl.rl_ddp", "rl.math_trainer"}, sorted(composers)


def test_no_import_cycle_in_the_library(graph):
    def visit(module, stack):
        assert module not in stack, " -> ".join([*stack, module])
        for dep in graph.get(module, ()):
            visit(dep, [*stack, module])
    for module in graph:
        visit(module, [])
