"""Real-footage benchmark (make real-bench): the command line of the `experiments.realbench`
package (experiments/realbench/__init__.py says what it measures and how).

    python -m experiments.real_benchmark --out benchmarks/results/real
"""

from experiments.realbench.cli import main

if __name__ == "__main__":
    main()
