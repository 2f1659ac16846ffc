"""Runs one generated program (a directory written by families.write) with `tl run` and compares its
outputs with the NumPy references, element by element within the program's tolerances.
A library module of tools/difftest (difftest.py runs the tool)."""
import json, os, re, shutil, signal, subprocess, time
import numpy as np
import npy_io

# every status a program can end with; all but pass, too_big and not_run make the tool fail
# (wrong_error: an invalid program that tl did not reject with a located error naming the problem;
# too_big: a program sized for sm_90a that an older target refused with the located shared-memory error)
STATUSES = ["pass", "mismatch", "compile_error", "cuda_error", "internal_error", "wrong_error", "error", "crash", "timeout", "too_big",
            "not_run"]
NOT_FAILURES = ("pass", "too_big", "not_run")

# tl's error for tiles past the target's shared memory: "... bytes of shared memory...; a block on sm_80 has at most N"
SMEM_REFUSAL = re.compile(r"\.py:\d+:\d+: error: .* bytes of shared memory.*a block on sm_(\d+)\w* has at most \d+")


def too_big_for_target(target, output):
    """Whether `output` is tl's located refusal of a program whose tiles exceed the shared memory of
    a target older than sm_90a (the families size their tiles for sm_90a's 227 KB a block)."""
    m = SMEM_REFUSAL.search(output)
    return bool(m) and target.startswith("cuda:") and int(m.group(1)) < 90


def classify_failure(rc, output):
    """The status of a `tl run` that exited with rc != 0 (not a timeout)."""
    low = output.lower()
    if rc >= 128 or rc < 0:
        return "crash"
    if "nvrtc" in low or "ptxas" in low or "compil" in low:
        return "compile_error"
    if "cuda_error" in low or "illegal" in low or "misaligned" in low or "launch" in low or "out of memory" in low:
        return "cuda_error"
    if rc == 3:
        return "internal_error"
    return "error"


def compare_output(got, ref, rtol, atol):
    """'' when got matches ref, else a description of the worst element."""
    if got.shape != ref.shape:
        return "shape %s, want %s" % (got.shape, ref.shape)
    with np.errstate(invalid="ignore"):  # inf - inf: same_special below
        err = np.abs(got - ref)
    nan_differs = np.isnan(got) != np.isnan(ref)
    same_special = (np.isinf(ref) & (got == ref)) | (np.isnan(got) & np.isnan(ref))
    err = np.where(same_special, 0.0, err)
    limit = atol + rtol * np.abs(np.where(np.isfinite(ref), ref, 0))
    bad = (err > limit) | nan_differs
    nbad = int(bad.sum())
    if not nbad:
        return ""
    finite_err = np.nan_to_num(err, nan=1e30, posinf=1e30)
    idx = np.unravel_index(int(np.argmax(np.where(bad, finite_err, -1))), err.shape)
    return "%d/%d bad, max err %.4g at %s got %r want %r" % (
        nbad, err.size, float(np.nan_to_num(err, nan=np.inf).max()), tuple(int(i) for i in idx), float(got[idx]), float(ref[idx]))


def expected_error_problem(expect, rc, output):
    """'' when tl rejected an invalid program as expect (meta's expect_error) says: exit 1 and a first
    line prog.py:LINE:COL: error: naming the problem; else what is wrong."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    if rc != 1:
        return "rc=%d (want 1 and an error at line %d) %s" % (rc, expect["line"], first[:300])
    m = re.match(r".*prog\.py:(\d+):(\d+): error: (.*)", first)
    if not m or int(m.group(1)) != expect["line"]:
        return "want an error at prog.py:%d, got: %s" % (expect["line"], first[:300])
    if expect["phrase"].lower() not in m.group(3).lower():
        return "the error does not say %r: %s" % (expect["phrase"], first[:300])
    return ""


def run_tl(cmd, timeout):
    """-> (exit code, output, seconds), or (None, '', seconds) past the timeout."""
    t0 = time.time()
    # its own process group, so that a timeout also ends the compilers tl started
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:  # tl missing or being rebuilt: this program's error, not the whole run's
        return 1, "cannot run %s: %s" % (cmd[0], e), time.time() - t0
    try:
        raw_output = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "", time.time() - t0
    return proc.returncode, raw_output.decode("utf-8", "replace"), time.time() - t0


def summary_of(output):
    return " | ".join(l.strip() for l in output.strip().splitlines()[:6])[:1500]


def compile_program(tl, target, prog_dir, timeout):
    """Compiles prog_dir's program for target without running it (to PTX through NVRTC for a CUDA
    target, to C++ for the CPU) -> (status, detail)."""
    with open(os.path.join(prog_dir, "meta.json")) as f:
        meta = json.load(f)
    emit = "cpp" if target == "cpu" else "ptx"
    cmd = [tl, "compile", os.path.join(prog_dir, "prog.py"), "--emit=" + emit, "--target", target]
    if meta.get("seed"):  # a @tile_kernel is specialized on its inputs: their specs come from the files
        for kind, fn in meta["args"]:
            cmd += ["--in", os.path.join(prog_dir, fn)]
    rc, output, seconds = run_tl(cmd, timeout)
    if rc is None:
        return "timeout", "after %d s" % timeout
    if "expect_error" in meta:
        problem = expected_error_problem(meta["expect_error"], rc, output)
        return ("wrong_error", problem) if problem else ("pass", "%.1f s" % seconds)
    if rc != 0:
        if too_big_for_target(target, output):
            return "too_big", summary_of(output)
        status = classify_failure(rc, output)
        return "compile_error" if status == "error" else status, "rc=%d %s" % (rc, summary_of(output))
    return "pass", "%.1f s" % seconds


def run_program(tl, target, prog_dir, out_dir, timeout):
    """Runs prog_dir's program, its outputs in out_dir (removed when it passes) -> (status, detail)."""
    with open(os.path.join(prog_dir, "meta.json")) as f:
        meta = json.load(f)
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    cmd = [tl, "run", os.path.join(prog_dir, "prog.py"), "--target", target]
    for kind, fn in meta["args"]:
        if kind == "inout":  # tl writes an inout tensor back: work on a copy
            shutil.copy(os.path.join(prog_dir, fn), os.path.join(out_dir, fn))
            cmd += ["--inout", os.path.join(out_dir, fn)]
        else:
            cmd += ["--in", os.path.join(prog_dir, fn)]
    for fn in meta["outs"]:
        cmd += ["--out", os.path.join(out_dir, fn)]
    rc, output, seconds = run_tl(cmd, timeout)
    if rc is None:
        return "timeout", "after %d s" % timeout
    first_lines = summary_of(output)
    if "expect_error" in meta:
        problem = expected_error_problem(meta["expect_error"], rc, output)
        if problem:
            return "wrong_error", problem
        shutil.rmtree(out_dir, ignore_errors=True)
        return "pass", "%.1f s" % seconds
    if rc != 0:
        if too_big_for_target(target, output):
            return "too_big", first_lines
        return classify_failure(rc, output), "rc=%d %s" % (rc, first_lines)
    problems = []
    for check in meta["checks"]:
        got_path = os.path.join(out_dir, check["got"])
        if not os.path.exists(got_path):
            return "crash", "missing output %s; %s" % (check["got"], first_lines)
        got = npy_io.load(got_path).astype(np.float64)
        ref = npy_io.load(os.path.join(prog_dir, check["ref"])).astype(np.float64)
        problem = compare_output(got, ref, check["rtol"], check["atol"])
        if problem:
            problems.append("%s: %s" % (check["got"], problem))
    if problems:
        return "mismatch", "; ".join(problems)
    shutil.rmtree(out_dir, ignore_errors=True)
    return "pass", "%.1f s" % seconds
