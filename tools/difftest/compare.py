"""Runs one generated program (a directory written by families.write) with `tl run` and compares its
outputs with the NumPy references, element by element within the program's tolerances.
A library module of tools/difftest (difftest.py runs the tool)."""
import json, os, shutil, signal, subprocess, time
import numpy as np
import npy_io

# every status a program can end with; all but pass and not_run make the tool fail
STATUSES = ["pass", "mismatch", "compile_error", "cuda_error", "internal_error", "error", "crash", "timeout", "not_run"]


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
    t0 = time.time()
    # its own process group, so that a timeout also ends the compilers tl started
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        raw_output = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", "after %d s" % timeout
    seconds = time.time() - t0
    output = raw_output.decode("utf-8", "replace")
    first_lines = " | ".join(l.strip() for l in output.strip().splitlines()[:6])[:1500]
    if proc.returncode != 0:
        return classify_failure(proc.returncode, output), "rc=%d %s" % (proc.returncode, first_lines)
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
