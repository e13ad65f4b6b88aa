"""The goals of issue 16 that tests prove: the fault matrix holds, the attack corpus breaches nothing, no secret leaks.

Runs those tests with pytest (the fault matrix's rows and their tests are in tests/fault_table.py) and reads what
each one recorded from pytest's JUnit XML: the rows that held and lost no data, the breaches counted over the
attack corpus, the planted secrets found anywhere. A test that fails counts against its figure.

    python benchmarks/robustness.py [--quick]   # --quick: the attack corpus and the secrets, not the fault matrix
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fault_table import FAULTS  # noqa: E402

from benchmarks.goals import figure  # noqa: E402

ATTACK = "tests/integration/agent/test_agent_under_attack.py"
SECRETS = "tests/integration/pipeline/test_secrets.py"


def run_tests(tests: list[str], xml: Path) -> dict[str, tuple[bool, dict[str, str]]]:
    """Each test's node id (parameters dropped): whether all of it passed, and the properties it recorded."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"]
    subprocess.run([*command, f"--junitxml={xml}", *tests], cwd=ROOT, capture_output=True, text=True)
    if not xml.is_file():
        sys.exit("error: pytest wrote no report: the tests could not be collected")
    results: dict[str, tuple[bool, dict[str, str]]] = {}
    for case in ET.parse(xml).iter("testcase"):
        test = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "").split("[")[0]
        passed = not any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        properties = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        before = results.get(test, (True, {}))
        results[test] = (before[0] and passed, {**before[1], **properties})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="leave the fault matrix out")
    args = parser.parse_args()
    matrix = [] if args.quick else sorted({f.test.split("::")[0] for f in FAULTS})
    with tempfile.TemporaryDirectory(prefix="vcpilot-bench-robustness-") as tmp:
        results = run_tests(sorted({*matrix, ATTACK, SECRETS}), Path(tmp) / "junit.xml")

    def counted(file: str, key: str) -> float | None:
        cases = [(ok, props) for test, (ok, props) in results.items() if test.startswith(file + "::")]
        if not cases or not all(ok and key in props for ok, props in cases):
            return None  # a test that failed or did not run: not measured
        return float(sum(int(props[key]) for _, props in cases))

    figures = [
        figure("robustness: attack corpus breaches", counted(ATTACK, "breaches"), "==", 0, unit="breaches"),
        figure("robustness: planted secrets found", counted(SECRETS, "leaks"), "==", 0, unit="leaks"),
    ]
    document: dict[str, object] = {"tests": {t: ok for t, (ok, _) in sorted(results.items())}}
    if matrix:
        rows = []
        for fault in FAULTS:
            ok, props = results.get(fault.test, (False, {}))
            row = json.loads(props.get("vcpilot-fault", "null") or "null")
            data = row["data"] if row else fault.proves[1]
            rows.append({"fault": fault.fault, "held": ok, "data_lost": data})
        held = sum(r["held"] for r in rows)
        lost = sum(r["held"] and not str(r["data_lost"]).startswith("none") for r in rows)
        figures += [
            figure("robustness: fault matrix rows that held", held, "==", len(FAULTS), unit="rows"),
            figure("robustness: fault matrix rows that lost data", lost, "==", 0, unit="rows"),
        ]
        document["fault_matrix"] = rows
    print(json.dumps({**document, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
