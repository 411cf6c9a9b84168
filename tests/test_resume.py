"""Nothing lost: a run killed (SIGKILL, 1 and 2 processes, at random moments), stopped (SIGTERM, to it or
to the tool that started it) or restarted by torchrun continues with the same command to exactly the
state of an uninterrupted run, and a second run on the same folder is refused.
Run: python -m pytest tests/test_resume.py"""

import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

import rl.seeding as seeding
from helpers import (REPO, args_with, assert_same_state, fresh_trainer, load, make_trainer, metrics, rl_seconds, run,
                     run_main, script_env, start, start_main, wait_for)
from rl.tools import launch

# STEPS steps of a small 2-layer adder model from scratch, a snapshot after each: a step takes about 0.1 s on the
# 2-core CPU, so a kill that lands from step 4 on leaves about 2 s of run unfinished, and digit_match
# gives a random policy gradients to follow. Most of a run's seconds are its start-up (imports; under
# torchrun the agent's and, in DDP's constructor, torch._dynamo's), not its steps.
STEPS = 24
KILL_ARGS = ["--no_wandb", "--init_from=scratch", "--rewards=digit_match:1.0", "--learning_rate=1e-3",
             "--rl_batch_size=32", "--rl_rollout_size=8", "--num_eval=50", f"--rl_train_steps={STEPS}",
             "--save_interval=1", "--eval_interval=4", "--warmup_steps=2", "--n_layer=2", "--n_embed=64", "--n_head=4",
             "--keep_snapshots=100"]


def kill_group(proc, sig):
    """Signal the script and, under torchrun, its workers (torchrun starts them in sessions of
    their own, so signalling the agent's process group alone would miss them); its (stdout, stderr)."""
    workers = children(proc.pid)
    os.killpg(proc.pid, sig)
    for pid in workers:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    # Generous: a process killed in the middle of a write (a snapshot's fsync) dies when the write returns, and a
    # CI machine's disk has stalled for over a minute (one run in many); a pass does not wait for it.
    return proc.communicate(timeout=300)


def children(pid: int) -> list:
    """Pids whose parent is `pid` (the workers of a torchrun agent)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if ppid == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def two_workers(proc, poll: float = 0.01) -> list:
    """The torchrun launcher's workers once it holds two (polled every `poll` s), or whatever it holds when it exits
    or a minute has passed."""
    deadline = time.time() + 60
    while len(workers := children(proc.pid)) < 2 and proc.poll() is None and time.time() < deadline:
        time.sleep(poll)
    return workers


def kill_launcher(proc):
    """kill -9 on the torchrun launcher alone: its workers, each in a session of its own, must exit
    within seconds (rl/run_control.py watches the launcher). Just after torchrun restarted its workers it may
    hold none for a moment: the kill waits for both."""
    workers = two_workers(proc)
    assert len(workers) == 2, f"the launcher has {len(workers)} workers, not 2"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    deadline = time.time() + 5
    while any(alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers), "a worker outlived its launcher by 5 s"


@pytest.mark.slow
def test_a_launcher_killed_while_its_workers_start_leaves_no_worker_running(tmp_path):
    """kill -9 on the torchrun launcher a second after it started its workers, while they import torch: each ends
    itself within seconds (the entry script watches the launcher before its imports), rather than training on
    unwatched, holding the run lock (a launcher killed just after it restarted its workers, say)."""
    def a_second_in():
        time.sleep(1.0)  # past the interpreter's own start, well inside the imports (torch's alone take seconds)
        assert not (tmp_path / "config.json").exists(), "the workers were past their start-up; the test proved nothing"
    alive_after = kill_a_starting_launcher(tmp_path, a_second_in)
    assert not alive_after, "a worker started just before its launcher was killed outlived it by 10 s"


def kill_a_starting_launcher(tmp_path, before_the_kill=lambda: None, poll: float = 0.01) -> list:
    """kill -9 on a 2-process run's torchrun launcher once its two workers exist (polled every `poll` s) and
    before_the_kill() has returned: the workers still alive 10 s later (killed then, so a failure leaves nothing)."""
    proc = start([*args_with(KILL_ARGS, rl_train_steps=400), f"--out_dir={tmp_path}"], torchrun=2)
    workers = two_workers(proc, poll)
    assert len(workers) == 2, "torchrun did not start its two workers within a minute"
    before_the_kill()
    os.kill(proc.pid, signal.SIGKILL)
    deadline = time.time() + 10
    while any(alive(pid) for pid in workers) and time.time() < deadline:
        time.sleep(0.05)
    alive_after = [pid for pid in workers if alive(pid)]
    for pid in alive_after:
        os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    return alive_after


@pytest.mark.slow
def test_a_launcher_killed_as_its_workers_appear_leaves_no_worker_running(tmp_path):
    """kill -9 on the torchrun launcher the moment its two workers exist, before their interpreters have read a line
    of the entry script: its watch then begins under whoever adopted them, and only the agent's closed store says
    the launcher is gone. Without that check both workers ran on, waiting minutes at dist.init to connect to it
    while holding the run lock (3 of 3 tries; found when the soak's launcher kill landed there in a CI run)."""
    alive_after = kill_a_starting_launcher(tmp_path, poll=0.001)
    assert not alive_after, "a worker started just as its launcher was killed outlived it by 10 s"


def test_the_agents_store_tells_whether_the_launcher_is_gone(monkeypatch):
    """rl/run_control.py agent_store_gone: a refused connection to torchrun's agent store (MASTER_ADDR:MASTER_PORT,
    when TORCHELASTIC_USE_AGENT_STORE says the agent serves it) means the agent is gone; anything that cannot tell
    is not taken for it."""
    import socket
    from rl.run_control import agent_store_gone
    server = socket.create_server(("127.0.0.1", 0))
    open_port = server.getsockname()[1]
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    try:
        monkeypatch.setenv("MASTER_PORT", str(open_port))
        assert agent_store_gone() is False  # the agent listens
        monkeypatch.setenv("MASTER_PORT", str(closed_port))
        assert agent_store_gone() is True
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "False")  # rank 0 will serve it, later: no telling
        assert agent_store_gone() is False
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
        monkeypatch.setenv("MASTER_PORT", "not a port")
        assert agent_store_gone() is False
        monkeypatch.delenv("MASTER_ADDR")
        assert agent_store_gone() is False
    finally:
        server.close()


def size(path) -> int:
    return path.stat().st_size if path.exists() else 0


# ---- exact resume -------------------------------------------------------------------------
# Each case is a state the snapshot must carry, in the setting where losing it would show: one process (DAPO) here;
# under DDP, the untied critic (its own embedding, head and optimizer, a second DDP-wrapped learner) and prioritized
# selection through the soak below, which kills a whole group, one worker under torchrun's --max-restarts, and the
# launcher alone (as an out-of-memory kill or a scheduler's hard stop would), whose workers must then stop by
# themselves, in RL and, first, in the warm start. AdderRLConfig draws with replay, so its buffer is in every
# case, and every kind of state, DPO's frozen reference too, is resumed in process (further below).
UNTIED_CRITIC = [*KILL_ARGS, "--rl_algorithm=ppo_critic", "--tie_weights=false"]


@pytest.mark.slow
def test_sigkill_then_same_command_equals_uninterrupted_run(tmp_path):
    """The snapshot's state equals the uninterrupted run's."""
    args = [*KILL_ARGS, "--rl_algorithm=dapo"]
    straight = tmp_path / "straight"
    run_main([*args, f"--out_dir={straight}"])
    out = tmp_path / "killed"
    args = [*args, f"--out_dir={out}"]
    proc = start_main(args)
    wait_for(out / "rl_snapshot_4.pt", proc)
    proc.kill()
    proc.join()
    assert not (out / f"rl_snapshot_{STEPS}.pt").exists(), "the run finished before the kill; the test proved nothing"
    again = run_main(args)
    assert "Resumed from" in again.stdout
    assert_same_state(load(straight / f"rl_snapshot_{STEPS}.pt"), load(out / f"rl_snapshot_{STEPS}.pt"))
    assert metrics(straight) == metrics(out)


@pytest.mark.parametrize("overrides", [dict(rl_algorithm="reinforce"), dict(rl_algorithm="ppo_critic"),
                                       dict(rl_algorithm="ppo_critic", tie_weights=False), dict(rl_algorithm="dpo"),
                                       dict(problem_sampler="prioritized"), dict(problem_sampler="uniform")],
                         ids=["reinforce", "ppo_critic", "ppo_critic-untied", "dpo", "prioritized", "uniform"])
def test_resume_in_process_is_exact_for_each_kind_of_state(tmp_path, overrides):
    """3 steps, the snapshot through a file, a trainer of other initial weights loads it, 3 more ==
    6 straight: the moving-average baseline, the critic and its optimizer, DPO's frozen reference and
    each sampler's selection state come back (AdderRLConfig draws with replay, so every case but the
    last two carries the replay buffer; the subprocess tests above cover a few of these states)."""
    straight = make_trainer(**overrides)
    for _ in range(6):
        straight.train_step()
    half = make_trainer(**overrides)
    for _ in range(3):
        half.train_step()
    torch.save(half.state_dict(), tmp_path / "half.pt")
    fresh = fresh_trainer(**overrides)
    fresh.load_state_dict(torch.load(tmp_path / "half.pt", weights_only=True))
    for _ in range(3):
        fresh.train_step()
    assert_same_state(straight.state_dict(), fresh.state_dict())


def test_resume_in_process_is_exact_and_the_negative_control_fails(tmp_path, monkeypatch):
    """Positive: 4 steps, state_dict, a fresh trainer loads it, 4 more == 8 straight.
    Negative control: the same, but the resumed trainer's sampling stream restarts from step 0
    (as a trainer that forgot its sampling RNG would): the states differ, so the check has teeth."""
    def run_steps(trainer, n):
        for _ in range(n):
            trainer.train_step()
        return trainer

    straight = run_steps(make_trainer(), 8).state_dict()

    def resumed_state():
        half = run_steps(make_trainer(), 4).state_dict()
        torch.save(half, tmp_path / "half.pt")
        fresh = fresh_trainer()  # other initial weights: everything must come from the snapshot
        fresh.load_state_dict(torch.load(tmp_path / "half.pt", weights_only=True))
        return run_steps(fresh, 4).state_dict()

    assert_same_state(straight, resumed_state())

    real = seeding.torch_generator
    calls = {"n": 0}

    def forgetful(seed, rank, step, purpose, device):
        if purpose == seeding.SAMPLING:
            calls["n"] += 1
            if calls["n"] > 4:  # the resumed trainer: its sampling stream replays from step 0
                step -= 4
        return real(seed, rank, step, purpose, device)
    monkeypatch.setattr(seeding, "torch_generator", forgetful)
    with pytest.raises(AssertionError, match="differs"):
        assert_same_state(straight, resumed_state())


# ---- graceful stop, restarts, the lock --------------------------------------------------------
@pytest.mark.slow
def test_sigterm_finishes_the_step_saves_and_exits_0(tmp_path):
    out = tmp_path / "run"
    args = [*args_with(KILL_ARGS, save_interval=100, rl_train_steps=40), f"--out_dir={out}"]
    proc = start(args)
    wait_for(out / "metrics.jsonl", proc)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    line = [l for l in stdout.splitlines() if l.startswith("Stopped by SIGTERM after step ")]
    assert len(line) == 1 and line[0].endswith("run the same command to continue"), stdout
    step = int(line[0].split("after step ")[1].split("/")[0])
    assert 0 < step < 40 and load(out / f"rl_snapshot_{step}.pt")["step"] == step


@pytest.mark.slow
def test_a_tool_stopped_by_sigterm_stops_its_run_at_a_snapshot_and_exits_143(tmp_path):
    """rl/tools/launch.py: a SIGTERM to a tool (python -m rl.tools.lengths, say), not to its run, reaches the run,
    which saves and stops; the tool waits for it, says so and exits 128 + 15, leaving no run training on alone."""
    out, log = tmp_path / "run", tmp_path / "console.log"
    args = [*args_with(KILL_ARGS, save_interval=100, rl_train_steps=40), f"--out_dir={out}"]
    code = f"from rl.tools import launch; launch.run({args!r}, log_path={str(log)!r})"
    tool = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=script_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    wait_for(out / "metrics.jsonl", tool)
    [run_pid] = children(tool.pid)
    os.kill(tool.pid, signal.SIGTERM)  # the tool alone, as `kill PID` or `timeout` would
    stdout, stderr = tool.communicate(timeout=60)
    assert tool.returncode == 143, stderr
    assert stderr.splitlines()[-1] == (f"stopped by SIGTERM: the run it started stopped too, at the end of a step "
                                       f"(exit 0); its console: {log}")
    line = [l for l in log.read_text().splitlines() if l.startswith("Stopped by SIGTERM after step ")]
    assert len(line) == 1, log.read_text()
    step = int(line[0].split("after step ")[1].split("/")[0])
    assert 0 < step < 40 and load(out / f"rl_snapshot_{step}.pt")["step"] == step
    with pytest.raises(ProcessLookupError):
        os.kill(run_pid, 0)  # waited for and gone


def test_a_second_signal_to_a_tool_reaches_its_run_as_sigint(tmp_path):
    """The first signal goes on as SIGTERM (the run's graceful stop), a second as SIGINT (its "stop now"), and the
    tool's own handlers are back afterwards. The child here only writes down what it receives."""
    got = tmp_path / "got"
    child = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time\n"
        "seen = []\n"
        "def handle(s, f):\n"
        f"    seen.append(signal.Signals(s).name); open({str(got)!r}, 'w').write(' '.join(seen))\n"
        "    if len(seen) == 2: sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, handle); signal.signal(signal.SIGINT, handle)\n"
        f"open({str(got)!r}, 'w').write('ready')\n"
        "while True: time.sleep(0.01)\n")], start_new_session=True)
    before = signal.getsignal(signal.SIGINT)
    with launch.passing_signals_to(child) as received:
        wait_for(got, child)
        while got.read_text() != "ready":
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)
        while got.read_text() != "SIGTERM":
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)
        child.wait(timeout=30)
    assert got.read_text() == "SIGTERM SIGINT"
    assert received == [signal.SIGINT, signal.SIGTERM]
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
def test_second_run_on_the_same_folder_is_refused_and_a_dead_run_leaves_no_lock(tmp_path):
    out = tmp_path / "run"
    args = [*args_with(KILL_ARGS, rl_train_steps=400), f"--out_dir={out}"]
    first = start_main(args)
    wait_for(out / "metrics.jsonl", first)
    second = run(args, check=False)  # the script itself: its one line, as a user's second command prints it
    assert second.returncode == 2 and second.stdout == ""
    assert second.stderr.startswith(f"error: another run is using {out} (pid {first.pid}); wait for it to finish")
    first.kill()
    first.join()
    last = max((int(p.stem.rsplit("_", 1)[1]) for p in out.glob("rl_snapshot_*.pt")), default=0)
    third = run_main(args_with(args, rl_train_steps=last + 2))  # the kernel dropped the dead run's lock
    assert "Final held-out accuracy" in third.stdout


@pytest.mark.slow
def test_soak_random_kills_of_a_two_process_run(tmp_path):
    """Kill a 2-process run of the untied critic under --max-restarts=1: its launcher alone during the warm start,
    then at random moments in RL three ways: its whole group (then the same command again), one worker (torchrun
    restarts both, which resume), and its launcher alone (whose workers must stop by themselves; then the same command
    again). The warm start continues from its progress file, and the final snapshot, the critic's own embedding, head
    and optimizer and problem selection's state included, equals an uninterrupted run's."""
    args = args_with(UNTIED_CRITIC, save_interval=2, problem_sampler="prioritized", init_from="sft", sft_max_steps=16,
                     sft_target_accuracy=1.0, sft_save_interval=4, sft_eval_interval=8, sft_num_eval=20)
    straight, out = tmp_path / "straight", tmp_path / "soak"
    run([*args, f"--out_dir={straight}"], torchrun=2)
    proc = start([*args, f"--out_dir={out}"], torchrun=2, max_restarts=1)
    wait_for(out / "warm_start_progress.pt", proc)
    kill_launcher(proc)
    assert not (out / "warm_start.pt").exists(), "the warm start finished before the kill; the test proved nothing"
    rl_time, rng, proc, kills = rl_seconds(straight), random.Random(0), None, []
    for kill in ("group", "worker", "launcher"):
        logged = size(out / "metrics.jsonl")
        proc = proc or start([*args, f"--out_dir={out}"], torchrun=2, max_restarts=1)
        while proc.poll() is None and size(out / "metrics.jsonl") <= logged:
            time.sleep(0.005)  # until this start has logged past the last one's lines: each kill lands in RL
        # within a tenth of RL's time on this machine: three kills leave RL unfinished on a fast machine or slow
        time.sleep(rng.uniform(0.0, 0.1 * rl_time))
        if proc.poll() is not None:  # finished before this kill (the assert below), or failed
            assert proc.returncode == 0, proc.communicate()[1]
            break
        if kill == "worker":
            os.kill(max(children(proc.pid)), signal.SIGKILL)  # the same start goes on: torchrun restarts both
        elif kill == "group":
            stdout, _ = kill_group(proc, signal.SIGKILL)
            assert "Warm start: continuing from step" in stdout, "the warm start began again"
            proc = None
        else:
            kill_launcher(proc)
            proc = None
        kills.append(kill)
    run([*args, f"--out_dir={out}"], torchrun=2)
    assert kills == ["group", "worker", "launcher"], f"the run outpaced the kills ({kills}); the soak proved little"
    assert_same_state(load(straight / f"rl_snapshot_{STEPS}.pt"), load(out / f"rl_snapshot_{STEPS}.pt"))
    assert metrics(straight) == metrics(out)
