"""What the run-time refusal of torch's attention (tfcourse/sandbox/refusal.py) costs a student's
process: CPU seconds of `refuse_attention`, after the imports the zygote makes for every process,
in fresh interpreters, and how many operators and Python functions it refused.

    .venv/bin/python bench/refusal.py [--runs 5]
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch, torch._dynamo, refusal
for module in refusal.EAGER_MODULES:
    __import__(module)
started = time.process_time()
refused = refusal.refuse_attention(json.loads(sys.argv[2]))
cpu = time.process_time() - started
print(json.dumps({"cpu": cpu, "operators": len(refused["operators"]),
                  "functions": len(refused["functions"])}))
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tfcourse.course import load_course

    forbidden = load_course(ROOT).forbidden_names()
    runs = []
    for _ in range(options.runs):
        out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "tfcourse" / "sandbox"),
                              json.dumps(forbidden)], capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    cpu = [run["cpu"] for run in runs]
    print(f"refuse_attention: {statistics.median(cpu) * 1000:.1f} ms CPU (median of "
          f"{len(cpu)}; {min(cpu) * 1000:.1f}-{max(cpu) * 1000:.1f}); "
          f"{runs[0]['operators']} operator kernels, {runs[0]['functions']} Python functions")


if __name__ == "__main__":
    main()
