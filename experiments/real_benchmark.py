"""Real-footage benchmark (make real-bench): the command line of the `realbench` package beside
this script (experiments/realbench/__init__.py says what it measures and how).

    python experiments/real_benchmark.py --out benchmarks/results/real
"""

from realbench.cli import main

if __name__ == "__main__":
    main()
