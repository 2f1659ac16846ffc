#!/usr/bin/env python3
"""Differential test of tl: generates TileLang tile programs (random families, deterministic by seed,
and the hand-written probes), runs each with `tl run --target TARGET` and compares with its NumPy
float64 reference. Prints a summary (also to $OUT/difftest.txt when OUT is set); exits 1 when any
program ends other than pass or not_run.
    python3 tools/difftest/difftest.py TL [TARGET] [--per-family N] [--seed S] [--jobs J] [--timeout T]
                                       [--budget B] [--families a,b] [--work DIR] [--compile-only]
TARGET: cuda (default), cuda:sm_80, cpu (the tool's self-test). tools/difftest/README.md has more."""
import argparse, json, os, random, shutil, subprocess, sys, tarfile, tempfile, time
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import compare, construct_families, families, probes, seed_families

# name -> generator, in run order: families.py's, then the language constructs' (construct_families.py), then the
# seed dialect's (seed_families.py)
FAMILIES = dict(families.FAMILIES, **construct_families.FAMILIES, **seed_families.FAMILIES)

FAILURES = [s for s in compare.STATUSES if s not in compare.NOT_FAILURES]


def program_list(per_family, seed, family_names):
    """[(name, family, make)] in run order: round robin over the families, so a cut run covers each."""
    per_family_lists = []
    if "hand" in family_names:
        hand_rs = np.random.RandomState(seed)  # the probes draw from one stream: built here, in order
        built = [probe(hand_rs) for probe in probes.PROBES[:per_family]]
        per_family_lists.append([(program.name, "hand", lambda program=program: program) for program in built])
    for family, generate in FAMILIES.items():
        if family not in family_names:
            continue
        programs = []
        for index in range(per_family):
            name = "%s_%03d" % (family, index)

            def make(generate=generate, name=name, key="%d:%s" % (seed, name)):
                r = random.Random(key)
                return generate(r, np.random.RandomState(r.getrandbits(32)), name)
            programs.append((name, family, make))
        per_family_lists.append(programs)
    ordered = []
    for index in range(per_family):
        ordered += [programs[index] for programs in per_family_lists if index < len(programs)]
    return ordered


def run_all(args, work):
    os.environ["TL_CACHE_DIR"] = os.path.join(work, "cache")
    progs_dir, outputs_dir = os.path.join(work, "progs"), os.path.join(work, "outputs")
    deadline = time.time() + args.budget
    programs = program_list(args.per_family, args.seed, args.families)

    def one(entry):
        name, family, make = entry
        if time.time() > deadline:
            return "not_run", "(time budget)", {}
        try:
            program = make()
            prog_dir = families.write(program, progs_dir)
        except Exception as e:  # a generator bug: report it with the program, go on with the others
            return "error", "generator: %r" % e, {}
        if args.compile_only:
            status, detail = compare.compile_program(args.tl, args.target, prog_dir, args.timeout)
        else:
            status, detail = compare.run_program(args.tl, args.target, prog_dir, os.path.join(outputs_dir, name), args.timeout)
        return status, detail, program.desc

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(one, programs))
    return [(name, family) + result for (name, family, _), result in zip(programs, results)]


def summary_lines(results):
    counts = {s: 0 for s in compare.STATUSES}
    per_family = {}
    for name, family, status, detail, desc in results:
        counts[status] += 1
        per_family.setdefault(family, {}).setdefault(status, 0)
        per_family[family][status] += 1
    lines = ["programs: %d   " % len(results) + "  ".join("%s: %d" % (s, counts[s]) for s in compare.STATUSES)]
    for family in sorted(per_family):
        lines.append("  %-12s %s" % (family, "  ".join("%s: %d" % (s, per_family[family][s]) for s in compare.STATUSES
                                                     if s in per_family[family])))
    for status in FAILURES:
        for name, family, s, detail, desc in sorted(results):
            if s == status:
                lines.append("%-14s %-14s %s   %s" % (status, name, detail, json.dumps(desc, sort_keys=True)))
    return lines


def gpu_names():
    """nvidia-smi's lines for the GPUs (none on a machine without)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
        return r.stdout.decode("utf-8", "replace").strip().splitlines()[:2]
    except (OSError, subprocess.TimeoutExpired):
        return []


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("tl", help="the tl binary")
    p.add_argument("target", nargs="?", default="cuda", help="cuda (default), cuda:sm_80, cpu")
    p.add_argument("--per-family", type=int, default=int(env("PER_FAMILY", 48)), help="programs per family (PER_FAMILY, 48)")
    p.add_argument("--seed", type=int, default=int(env("SEED", 1)), help="the programs' seed (SEED, 1)")
    p.add_argument("--jobs", type=int, default=int(env("JOBS", os.cpu_count() or 1)), help="programs at once (JOBS, the cores)")
    p.add_argument("--timeout", type=int, default=int(env("TIMEOUT", 60)), help="seconds per program (TIMEOUT, 60)")
    p.add_argument("--budget", type=int, default=int(env("BUDGET", 600)),
                   help="seconds overall (BUDGET, 600): programs not started by then are not_run")
    p.add_argument("--families", default=",".join(["hand"] + list(FAMILIES)), help="comma-separated (all)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile each program for TARGET (CUDA: to PTX through NVRTC) and run none: for a machine without its GPU")
    p.add_argument("--work", help="work directory (default: a new temporary one, removed when everything passes)")
    args = p.parse_args()
    args.tl = os.path.abspath(args.tl)
    args.families = args.families.split(",")
    unknown = set(args.families) - set(["hand"] + list(FAMILIES))
    if unknown:
        p.error("unknown families: %s" % ", ".join(sorted(unknown)))
    work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="difftest.")
    os.makedirs(work, exist_ok=True)

    t0 = time.time()
    results = run_all(args, work)
    failed = [r for r in results if r[2] in FAILURES]
    keep_work = failed or args.work
    lines = ["difftest: tl=%s target=%s%s per_family=%d seed=%d jobs=%d wall=%ds work=%s" % (
        args.tl, args.target, " (compile only)" if args.compile_only else "", args.per_family, args.seed, args.jobs, time.time() - t0, work if keep_work else "(removed)")]
    lines += gpu_names() + summary_lines(results)
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    out = env("OUT")
    if out:
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "difftest.txt"), "w") as f:
            f.write(report)
        if failed:  # the failing programs with their outputs, to look at where the run happened
            with tarfile.open(os.path.join(out, "difftest_failures.tgz"), "w:gz") as tar:
                for name, *_ in failed:
                    for sub in ("progs", "outputs"):
                        path = os.path.join(work, sub, name)
                        if os.path.exists(path):
                            tar.add(path, arcname=os.path.join(sub, name))
    if not keep_work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
