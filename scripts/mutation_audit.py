"""Mutation audit: do the tests fail when the code under them is broken?

mutmut (pip install "trtbuild[audit]") changes one operator, constant, argument or condition at a time in
the modules named, runs the tests named against each change, and counts the changes no test noticed
("survived"). String mutations are left out: layer names and messages have tests of their own
(tests/layers/test_refusals.py, the naming tests) and would flood the list.

    python scripts/mutation_audit.py --modules trtbuild/layers/lrn.py --tests tests/layers/test_lrn.py \
        tests/layers/test_refusals.py [--children 2]

It works on a copy of the checkout (git archive of HEAD plus uncommitted changes of the named files), so the
checkout is never touched, and prints the counts and every surviving change as a diff.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

RUNNER = '''import sys
import mutmut.mutation.mutators as m
m.mutation_operators[:] = [(t, f) for t, f in m.mutation_operators if f is not m.operator_string]
from mutmut.__main__ import cli
sys.argv[0] = "mutmut"
sys.exit(cli())
'''


def _config(modules: list[str], tests: list[str]) -> str:
    lines = ["[mutmut]", "source_paths=trtbuild", "only_mutate="] + [f"  {m}" for m in modules]
    lines += ["pytest_add_cli_args_test_selection="] + [f"  {t}" for t in tests]
    # a worker forked from a process that ran torch can hang in torch's thread pool: start them fresh
    lines += ["pytest_add_cli_args=-q", "do_not_mutate_patterns=", "  raise ", "process_isolation=forkserver",
              "forkserver_warmup=import"]
    return "\n".join(lines) + "\n"


def _copy_checkout(dest: Path, paths: list[str]) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for p in paths:  # the working-tree versions of what is audited
        shutil.copy2(ROOT / p, dest / p)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", nargs="+", required=True, help="trtbuild/... .py files to mutate")
    ap.add_argument("--tests", nargs="+", required=True, help="test files to run against each mutant")
    ap.add_argument("--children", type=int, default=2, help="mutants tested in parallel")
    args = ap.parse_args(argv)
    try:
        import mutmut  # noqa: F401
    except ImportError:
        sys.exit('mutation_audit: mutmut is not installed; pip install "trtbuild[audit]"')
    for p in args.modules + args.tests:
        if not (ROOT / p).is_file():
            sys.exit(f"mutation_audit: {p} is not a file of this checkout")
    with tempfile.TemporaryDirectory(prefix="trtbuild-mutation-") as tmp:
        work = Path(tmp)
        _copy_checkout(work, args.modules + args.tests)
        (work / "setup.cfg").write_text(_config(args.modules, args.tests))
        runner = work / ".mutmut_runner.py"
        runner.write_text(RUNNER)
        run = [sys.executable, str(runner)]
        env_cwd = {"cwd": str(work)}
        subprocess.run(run + ["run", "--max-children", str(args.children)], check=False, **env_cwd,
                       stdout=subprocess.DEVNULL)
        results = subprocess.run(run + ["results", "--all", "true"], capture_output=True, text=True, **env_cwd).stdout
        status = [line.rsplit(":", 1) for line in results.splitlines() if ":" in line]
        counts: dict[str, int] = {}
        for _, s in status:
            counts[s.strip()] = counts.get(s.strip(), 0) + 1
        print("mutants: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        for name, s in status:
            if s.strip() == "survived":
                diff = subprocess.run(run + ["show", name.strip()], capture_output=True, text=True, **env_cwd).stdout
                print(f"\nsurvived: {name.strip()}")
                print("\n".join(line for line in diff.splitlines() if line[:2] in ("- ", "+ ")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
