"""The library stays readable: no function over 60 lines or with over 6 positional parameters, no line
over 120 characters, no block of six lines written twice (rl/, model/, configs/; the entry script's
main and the measuring tools in rl/tools/ excepted), and no import cycle.
Run: python -m pytest tests/test_structure.py"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIBRARY = sorted(p for folder in ("rl", "model", "configs") for p in (REPO / folder).rglob("*.py")
                 if "tools" not in p.parts)
EXEMPT = {("rl/rl_ddp.py", "main")}


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
            if (name, fn.name) in EXEMPT:
                continue
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


def test_no_import_cycle_in_the_library():
    graph = {}
    for path in LIBRARY:
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        imports = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imports.add(node.module)
            elif isinstance(node, ast.Import):
                imports.update(a.name for a in node.names)
        graph[module] = {m for m in imports if m.split(".")[0] in ("rl", "model", "configs")}

    def visit(module, stack):
        assert module not in stack, " -> ".join([*stack, module])
        for dep in graph.get(module, ()):
            visit(dep, [*stack, module])
    for module in graph:
        visit(module, [])
