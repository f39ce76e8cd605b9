"""Run by tests/test_forkserver.py in a child of the fork server: a grader that never ends."""
import time


def main(args):
    while True:
        time.sleep(1)
