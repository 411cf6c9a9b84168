"""Every code block of README.md and docs/*.md does what it shows (issue 35); one case per block, FILE:LINE.

    python -m pytest tests/test_snippets.py

python blocks: a program runs as shown, in a subprocess from a temporary working directory with the
repository on PYTHONPATH, after the files it names are made there (a tiny real snapshot where it
loads out/.../rl_snapshot_200.pt: a snapshot rebuilds its own model). A block the text says to save
as a file (`configs/NAME.py`:) or to add to files (`# rl/FILE.py` headings) is written there in a
temporary copy of the repository, which then does what the text claims (CLAIMS).

bash blocks, command by command, in order, from one temporary copy of the repository per block:
- a quick command runs as shown and must exit 0 (--help, python -c, the plot, readme and evaluate
  tools), after a tiny real run is put in the folder it plots and its snapshot at the path it names;
- a training command cannot run here: its arguments are parsed and validated as rl/rl_ddp.py does
  before it trains (build_config, validate_world_size with torchrun's process count);
- the benchmark, study and lengths commands run in-process as shown, each run they name validated the
  same way (benchmark, study); docs/results.md says all of it has run, so every run must be read back
  from results/ (the test refuses to train);
- NOT_RUN lists the commands that are not run, and why.
"""

import itertools
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from configs.cli import build_config, parse_command_line
from helpers import REPO, TINY_ARGS, run, script_env

DOCUMENTS = ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
# (document, how the command starts, why it is not run); every entry must still match a command
NOT_RUN = [
    ("README.md", "pip install", "installs packages: the tests run in what it installed"),
    ("README.md", "python -m pytest", "the whole suite, this file included"),
    ("docs/earlier-studies.md", "python -m rl.tools.study --config AdderRLConfig",
     "elided ('...' stands for the other variants), and its result files, of earlier code, are not kept"),
]
TIMEOUT = 180  # seconds for one command; anything slower does not belong in the suite


@dataclass
class Block:
    file: str  # as the repository names it: README.md, docs/tasks.md
    line: int  # of the opening fence
    lang: str  # python, bash, or "" (a run's output)
    code: str
    intro: str  # the paragraph just above the block

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def read_blocks(file: str, text: str = None) -> list:
    """Every fenced block of `file` (its text from the repository unless given)."""
    lines = (text if text is not None else (REPO / file).read_text()).splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{file}:{i + 1}: a code block that is never closed"
        k = i
        while k > 0 and not lines[k - 1].strip():
            k -= 1
        first = k
        while first > 0 and lines[first - 1].strip():
            first -= 1
        blocks.append(Block(file, i + 1, m.group(1), "\n".join(lines[i + 1:end]) + "\n", " ".join(lines[first:k])))
        i = end + 1
    return blocks


def all_blocks() -> list:
    return [b for file in DOCUMENTS for b in read_blocks(file)]


def commands(block: Block) -> list:
    """(line, command) of a bash block: continuation lines joined, blank lines and comments left out."""
    out, pending, start = [], "", None
    for n, line in enumerate(block.code.splitlines(), block.line + 1):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        start = start if pending else n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def not_run(block: Block, command: str):
    return next((why for file, start, why in NOT_RUN if file == block.file and command.startswith(start)), None)


# ---- the environment of a subprocess, and the copies it runs in

def environment(pythonpath: Path) -> dict:
    """A run's environment (wandb off, one thread), `python` this interpreter, `pythonpath` importable."""
    return {**script_env(), "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
            "PYTHONPATH": str(pythonpath), "MPLBACKEND": "Agg"}


def run_checked(argv: list, cwd: Path, pythonpath: Path, where: str, what: str):
    """argv to its end, exit 0, or AssertionError naming `where` and `what` ran, with the end of its console."""
    # its own process group, killed whole on a timeout: a tool's launched run (a grandchild) would outlive bash
    with subprocess.Popen(argv, cwd=cwd, env=environment(pythonpath), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError(f"{where}: {what} still running after {TIMEOUT}s") from None
    proc = subprocess.CompletedProcess(argv, proc.returncode, out, err)
    if proc.returncode != 0:
        raise AssertionError(f"{where}: {what} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return proc


def copy_repository(dest: Path) -> Path:
    """The working tree's files (tracked, and untracked ones git does not ignore) under dest; out/ empty."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in names:
        if name and (REPO / name).is_file():  # (a tracked file deleted in the working tree is left out)
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dest / name)
    (dest / "out").mkdir(exist_ok=True)
    return dest


def block_copy(tmp_path: Path) -> Path:
    """The block's one copy of the repository, made at its first use: its commands run from there in turn."""
    copy = tmp_path / "repo"
    return copy if copy.exists() else copy_repository(copy)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A run folder of AdderRLConfig made by the real entry script in seconds: metrics and a snapshot."""
    out = tmp_path_factory.mktemp("tiny") / "AdderRLConfig"
    run(["--config_name", "AdderRLConfig", "--no_wandb", *TINY_ARGS, "--rl_train_steps=2", f"--out_dir={out}"])
    assert list(out.glob("rl_snapshot_*.pt")), "the tiny run wrote no snapshot"
    return out


def tiny_snapshot(request) -> Path:
    """The tiny run's snapshot, for a block that names any snapshot file (it rebuilds its own model)."""
    return max(request.getfixturevalue("tiny_run").glob("rl_snapshot_*.pt"))


# ---- python blocks

def fragment(block: Block) -> dict:
    """{path: (text, append)} of a block the text says to save or add to files; {} for a program."""
    parts = re.split(r"^# ((?:configs|rl|model)/\w+\.py)\n", block.code, flags=re.M)
    if len(parts) > 1:  # "# rl/objectives.py" then its lines, "# rl/algorithms.py" then its lines: added to each
        assert not parts[0].strip(), f"{block.id}: lines before the first '# FILE' heading"
        return {path: (text, True) for path, text in zip(parts[1::2], parts[2::2])}
    m = re.search(r"`((?:configs|rl|model)/\w+\.py)`:$", block.intro)  # "Save as `configs/maximum.py`:"
    return {m.group(1): (block.code, False)} if m else {}


# What the text around each fragment claims, checked in the copy it was written to (a script run there).
# The tiny settings keep a training run to seconds; TINY_ARGS and OUT are filled in.
CLAIMS = {
    ("configs/subtractor.py",): """
        # "a 3-digit subtraction task is configs/subtractor.py": found by name, resolved, valid
        from configs.cli import build_config, parse_command_line
        config = build_config(parse_command_line(["--config_name", "SubtractorRLConfig"]))
        config.validate_world_size(1)
        assert (config.task, config.ndigit) == ("subtractor", 3), (config.task, config.ndigit)
        """,
    ("configs/maximum.py",): """
        # "trains on prompts like 07m42= with target 70&60=24$ ...; --show_work=false gives 24$"
        from configs.cli import build_config, parse_command_line
        from rl.math_env import MathEnvironment
        from rl.rl_ddp import main
        for show_work, target in (("true", "70&60=24$"), ("false", "24$")):
            config = build_config(parse_command_line(["--config_name", "MaximumRLConfig", f"--show_work={show_work}"]))
            problem = MathEnvironment(**config.task_args()).problem(7, 42)
            assert (problem.prompt, problem.target) == ("07m42=", target), problem
        # "python rl/rl_ddp.py --config_name MaximumRLConfig trains": a step of it, on the tiny settings
        assert main(["--config_name", "MaximumRLConfig", "--no_wandb", *TINY_ARGS, "--rl_train_steps=1",
                     "--out_dir=" + OUT]) == 0
        """,
    ("rl/algorithms.py", "rl/objectives.py"): """
        # "Then python rl/rl_ddp.py --config_name AdderRLConfig --rl_algorithm=unlikelihood trains with it."
        from configs.cli import build_config, parse_command_line
        from rl.objectives import objective_class
        from rl.rl_ddp import main
        config = build_config(parse_command_line(["--config_name", "AdderRLConfig", "--rl_algorithm=unlikelihood"]))
        config.validate_world_size(1)
        assert objective_class(config.objective, config.advantage_mode).__name__ == "Unlikelihood"
        assert main(["--config_name", "AdderRLConfig", "--rl_algorithm=unlikelihood", "--no_wandb", *TINY_ARGS,
                     "--rl_train_steps=1", "--out_dir=" + OUT]) == 0
        """,
}


def check_python(block: Block, tmp_path: Path, request):
    files = fragment(block)
    if not files:  # a program: run as shown, after making the files it names
        cwd = tmp_path / "cwd"
        cwd.mkdir()
        for path in re.findall(r"""["'](out/[^"']+\.pt)["']""", block.code):
            (cwd / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(tiny_snapshot(request), cwd / path)
        (tmp_path / "snippet.py").write_text(block.code)
        run_checked([sys.executable, str(tmp_path / "snippet.py")], cwd, REPO, block.id, "the block")
        return
    key = tuple(sorted(files))
    assert key in CLAIMS, f"{block.id}: a block to save as {', '.join(key)}; CLAIMS has no check of what it does"
    copy = copy_repository(tmp_path / "repo")
    for path, (text, append) in files.items():
        assert (copy / path).exists() == append, f"{block.id}: {path} {'does not exist' if append else 'exists'}"
        with open(copy / path, "a" if append else "w") as f:
            f.write(("\n\n" if append else "") + text)
    script = (f"TINY_ARGS = {TINY_ARGS!r}\nOUT = {str(tmp_path / 'out')!r}\n" + textwrap.dedent(CLAIMS[key]))
    run_checked([sys.executable, "-c", script], copy, copy, block.id, f"the check of what {', '.join(key)} does")


# ---- bash blocks

def validate(args: list, world_size: int, where: str):
    """What rl/rl_ddp.py checks before it trains: the config name, every option and value, the batches
    across world_size processes."""
    try:
        build_config(parse_command_line(args)).validate_world_size(world_size)
    except Exception as e:  # noqa: BLE001  (whatever it is, the command would not run)
        raise AssertionError(f"{where}: {type(e).__name__}: {e}") from None


def refuse_to_train(*args, **kwargs):
    raise AssertionError(f"the command would train ({args[0] if args else kwargs}): its result is not in results/")


def run_tool(name: str, args: list, where: str, tmp_path: Path, monkeypatch):
    """python -m rl.tools.NAME ARGS in-process, as shown, except that training is refused and each run it
    names is validated; its out_dir default lies under tmp_path. lengths reads and writes (its plot) the results/
    of a copy of the repository, from whose root it runs."""
    from rl import run_dir
    from rl.tools import benchmark, launch, lengths, results, study
    module = {"benchmark": benchmark, "study": study, "lengths": lengths}[name]
    monkeypatch.setattr(module, "launch", types.SimpleNamespace(REPO=str(tmp_path), run=refuse_to_train,
                                                                check_command=launch.check_command))
    if module is lengths:
        copy = block_copy(tmp_path)
        monkeypatch.setattr(results, "ROOT", str(copy / "results"))
        monkeypatch.chdir(copy)  # (a run's folder, out/lengths/..., is relative to it)
    elif module is benchmark:
        measure = benchmark.measure

        def validated_measure(a):
            for config in a.configs:
                for seed in a.seeds:
                    for sampler in a.samplers or [None]:
                        extra = benchmark.sampler_args(sampler) if sampler else []
                        validate(benchmark.script_args(config, seed, str(tmp_path / "run"), extra, a.set), a.nproc,
                                 where)
            return measure(a)
        monkeypatch.setattr(benchmark, "measure", validated_measure)
        monkeypatch.setattr(benchmark, "run_one", refuse_to_train)
        monkeypatch.setattr(benchmark, "supervised_baseline", refuse_to_train)
    else:
        monkeypatch.chdir(tmp_path)  # the repository root of the command: init_from=out/study/... is relative to it
        run_variant = study.run_variant

        def validated_run_variant(config, variant, overrides, seed, root):
            validate(["--config_name", config, f"--seed={seed}", *[f"--{kv}" for kv in overrides]], 1, where)
            row = run_variant(config, variant, overrides, seed, root)
            # the run leaves its warm start in its folder (named as run_variant names it): a later variant's
            # init_from= may start from it
            folder = os.path.join(root, f"{config}-{variant.replace(' ', '_')}-seed{seed}")
            os.makedirs(folder, exist_ok=True)
            Path(run_dir.warm_start_path(folder)).touch()
            return row
        monkeypatch.setattr(study, "run_variant", validated_run_variant)
    monkeypatch.setattr(sys, "argv", [f"python -m rl.tools.{name}", *args])
    try:
        module.main()
    except SystemExit as e:
        if e.code:
            raise AssertionError(f"{where}: exit {e.code}") from None
    except AssertionError as e:
        raise AssertionError(f"{where}: {e}") from None


def plotted_folders(argv: list) -> list:
    """The run folders of `python -m rl.tools.plot RUN [RUN ...] [--out FILE]`; [] for another command."""
    if argv[:3] != ["python", "-m", "rl.tools.plot"]:
        return []
    return list(itertools.takewhile(lambda a: not a.startswith("-"), argv[3:]))


def check_bash(block: Block, tmp_path: Path, request, monkeypatch) -> list:
    """Each command of the block in order; returns [(line, why)] of those not run."""
    skipped = []
    for line, command in commands(block):
        where = f"{block.file}:{line}"
        why = not_run(block, command)
        if why:
            skipped.append((line, why))
            continue
        argv = shlex.split(command, comments=True)
        assert "..." not in argv and "&&" not in argv, f"{where}: not one runnable command (NOT_RUN?): {command}"
        if argv[0] == "torchrun" or (argv[:2] == ["python", "rl/rl_ddp.py"] and not {"-h", "--help"} & set(argv)):
            script = argv.index("rl/rl_ddp.py")
            nproc = next((int(a.split("=")[1]) for a in argv[:script] if a.startswith("--nproc_per_node=")), 1)
            validate(argv[script + 1:], nproc, where)  # a training run: parsed and validated, not trained
        elif argv[:2] == ["python", "-m"] and argv[2] in ("rl.tools.benchmark", "rl.tools.study", "rl.tools.lengths"):
            run_tool(argv[2].rsplit(".", 1)[1], argv[3:], where, tmp_path, monkeypatch)
        else:  # quick: as shown, from the repository root (a copy, so whatever it writes stays in tmp_path)
            copy = block_copy(tmp_path)
            plotted = plotted_folders(argv)
            for folder in plotted:
                shutil.copytree(request.getfixturevalue("tiny_run"), copy / folder)
            for path in [a for a in argv if re.fullmatch(r"out/.+\.pt", a)]:  # a snapshot to evaluate
                (copy / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(tiny_snapshot(request), copy / path)
            run_checked(["bash", "-c", command], copy, copy, where, command)
            for folder in plotted if "--out" not in argv else []:
                assert (copy / folder / "curves.png").is_file(), f"{where}: no {folder}/curves.png"
    return skipped


def check_block(block: Block, tmp_path: Path, request, monkeypatch):
    if block.lang == "python":
        check_python(block, tmp_path, request)
    else:
        skipped = check_bash(block, tmp_path, request, monkeypatch)
        if len(skipped) == len(commands(block)):
            pytest.skip("; ".join(f"{block.file}:{line} {why}" for line, why in skipped))


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in all_blocks() if b.lang in ("python", "bash")], ids=lambda b: b.id)
def test_the_block_does_what_it_shows(block, tmp_path, request, monkeypatch):
    check_block(block, tmp_path, request, monkeypatch)


def test_every_block_is_python_bash_or_a_runs_output():
    """A block of another language would not be checked here; an unlabelled one is what a run prints."""
    for b in all_blocks():
        assert b.lang in ("python", "bash", ""), f"{b.id}: a ```{b.lang} block; teach tests/test_snippets.py to run it"
        if not b.lang:
            lines = [line.lstrip() for line in b.code.splitlines()]
            assert not any(line.startswith(("python ", "torchrun ", "pip ", "$ ")) for line in lines), \
                f"{b.id}: commands in an unlabelled block; mark it ```bash so it is checked"


def test_each_command_not_run_is_still_in_its_document():
    for file, start, why in NOT_RUN:
        found = [c for b in read_blocks(file) if b.lang == "bash" for _, c in commands(b) if c.startswith(start)]
        assert found, f"NOT_RUN: no command of {file} starts with {start!r}; drop the entry"


# A snippet broken on purpose (in a copy of its document's text) fails its own case, named by its line.
BROKEN = [
    pytest.param("README.md", "from configs.base import BaseRLConfig\n", "", id="README subtractor without its base"),
    pytest.param("docs/tasks.md", "answer_digits=lambda n: n,", "answer_digits=lambda n: n + 1,",
                 id="tasks.md maximum: not the target it says"),
    pytest.param("docs/running.md", "snap = load_snapshot(", "snap = load_snapshots(", id="running.md snapshot"),
    pytest.param("README.md", "--learning_rate=1e-4", "--learning_rat=1e-4", id="README training command"),
    pytest.param("README.md", "env.generate_problem()", "env.generate_problems()", id="README python -c"),
    pytest.param("docs/results.md", "--samplers replay --seeds 0 1 2 --what_rl_adds",
                 "--samplers replay --seeds 0 1 2 3 --what_rl_adds", id="results.md benchmark of a run not made"),
    pytest.param("docs/results.md", "lengths --seeds 0 1 2 --set carry_column=true attention_window=8",
                 "lengths --seeds 0 1 2 3 --set carry_column=true attention_window=8",
                 id="results.md lengths of a seed not run"),
]


@pytest.mark.slow
@pytest.mark.parametrize("file, good, bad", BROKEN)
def test_a_block_broken_on_purpose_fails(file, good, bad, tmp_path, request, monkeypatch):
    text = (REPO / file).read_text()
    assert good in text, f"{file} no longer holds {good!r}: break another snippet here"
    start = text.index(good)
    line = text.count("\n", 0, start) + 1
    block = next(b for b in read_blocks(file, text.replace(good, bad, 1))
                 if b.line < line <= b.line + b.code.count("\n"))
    with pytest.raises(AssertionError) as failure:
        check_block(block, tmp_path, request, monkeypatch)
    named = re.match(rf"{re.escape(file)}:(\d+)", str(failure.value))  # the case names the block, or a line of it
    assert named and block.line <= int(named.group(1)) <= block.line + block.code.count("\n"), str(failure.value)


def test_a_command_past_its_time_is_killed_with_what_it_launched(tmp_path, monkeypatch):
    """A tool that launches a run (rl/tools/launch.py) leaves a grandchild behind bash: on a timeout the whole
    process group goes, so no run of a shown command outlives the suite."""
    import time
    monkeypatch.setattr(sys.modules[__name__], "TIMEOUT", 1)
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(AssertionError, match=re.escape("here: the command still running after 1s")):
        run_checked(["bash", "-c", f"sleep 1000 & echo $! > {pidfile}; wait"], tmp_path, tmp_path, "here", "the command")
    grandchild = int(pidfile.read_text())
    for _ in range(50):  # reaped by init once killed
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the launched process {grandchild} outlived the timeout")
