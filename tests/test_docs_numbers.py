"""Modelled and measured figures live only in the generated files of benchmarks/results/: the README, the docs and
the examples say what the results show in words and link to them. A figure copied by hand goes stale at the next
run (and did: docs quoted results that had since been regenerated).

What counts as such a figure: a decimal multiple ("1.97x", "0.87 x"), a multiple next to a comparison ("3x
faster"), a time in ms / us, or a table row of three or more numbers with two or more decimals (a results table's
columns of times and ratios). Hardware facts cited from a source (msKPP's measured cycles and copy rates, the CANN
.ini, msopprof's launch overhead, ...) are facts the model starts from, not its results: a sentence or table row
that names its source may quote them.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

FIGURE = re.compile(r"\b\d+\.\d+\s?x\b"  # a decimal multiple: 1.97x, 0.5 x
                    r"|\b\d+(?:\.\d+)?\s?x (?:faster|slower)\b"  # any multiple that compares speed
                    r"|\b\d+(?:\.\d+)?\s?(?:ms|us|µs)\b")  # a time
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d\d+(?![\w.])")  # two or more decimals: a computed value
# the sources hardware facts are cited from (docs/benchmarks.md, the assumptions of timeline.table())
CITED = re.compile(r"msKPP|msopprof|platform_config|Ascend910B\d\.ini|\.ini's|FlagGems|MindIE|Hot Chips|"
                   r"torch-performance-test-data|hicann|Ascend C best practices")


def units(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of every table row and every prose sentence of a Markdown or Python text: the
    scope a citation covers."""
    found, paragraph = [], []

    def flush():
        if paragraph:
            joined = " ".join(line for _, line in paragraph)
            found.extend((paragraph[0][0], sentence) for sentence in re.split(r"(?<=\.)\s+(?=[A-Z`*(\[])", joined))
            paragraph.clear()

    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("|"):
            flush()
            found.append((number, stripped))
        elif not stripped or stripped.startswith(("- ", "#", "```")) or re.match(r"\d+\. ", stripped):
            flush()
            if stripped:
                paragraph.append((number, stripped))
        else:
            paragraph.append((number, stripped))
    flush()
    return found


def hand_copied_figures(text: str) -> list[tuple[int, str]]:
    """(line, figure) of every modelled or measured figure outside a cited sentence or row."""
    found = []
    for number, unit in units(text):
        if CITED.search(unit):
            continue
        found += [(number, match.group()) for match in FIGURE.finditer(unit)]
        decimals = DECIMAL.findall(unit)
        if unit.startswith("|") and len(decimals) >= 3:
            found.append((number, " | ".join(decimals)))
    return found


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*.py"))]


@pytest.mark.parametrize("path", documents(), ids=lambda path: str(path.relative_to(ROOT)))
def test_no_hand_copied_figures(path):
    found = hand_copied_figures(path.read_text())
    assert not found, (f"{path.relative_to(ROOT)} quotes figures that belong in benchmarks/results/ (say what they "
                       f"show in words and link to the results file): {found}")


def test_the_check_catches_a_planted_figure():
    readme = (ROOT / "README.md").read_text()
    assert hand_copied_figures(readme) == []
    planted = readme.replace("## Layout", "The fused eval kernel models 1.97x the CANN way on D2.\n\n## Layout", 1)
    line = planted.splitlines().index("The fused eval kernel models 1.97x the CANN way on D2.") + 1
    assert hand_copied_figures(planted) == [(line, "1.97x")]
    for sentence, figure in [("| leaky_relu, reference | 33.4 ms (1.37x) |", "33.4 ms"),
                             ("D4 now models 0.87 x of the aclnn path.", "0.87 x"),
                             ("The backward is 3x slower than the composite.", "3x slower"),
                             ("Ours takes 48.79 us,\nthe CANN way 42.34 us.", "48.79 us"),
                             ("| D2 64->128 @32 | 19.49 | 14.17 | 52.87 | **1.97** |", "19.49 | 14.17 | 52.87 | 1.97")]:
        assert figure in [found for _, found in hand_copied_figures(sentence)], sentence


def test_cited_hardware_facts_and_plain_sizes_are_not_flagged():
    for text in ["msKPP csrc/prof_data/resource910b.cpp UB_TO_GM_910b1: 110 GB/s = 65.6 B/cycle, 1.7x too fast.",
                 "msopprof's `sample_overhead` (910B4, one core, 10 KB) takes 5.18-5.90 us as a task, 4.60-5.34 us\n"
                 "of it on the core; we charge the dispatch (0.58 us) per launch.",
                 "| hbm_bytes_per_s | 1.6e+12 | B/s | FlagGems PR #2162: 2^30 float32 in 3.00 ms = 1.43 TB/s |",
                 "A 4x4 kernel, 2x upsampling and a 1x1 conv; at most 2x torch's error; bytes / 1.6 TB/s.",
                 "python benchmarks/bench_leaky_relu.py  # ~10 s"]:
        assert hand_copied_figures(text) == [], text


def test_the_results_files_the_docs_link_exist():
    linked = set()
    for path in documents():
        linked |= set(re.findall(r"(?:benchmarks/)?results/([\w]+\.(?:md|csv))", path.read_text()))
    assert linked, "the docs link no results file"
    missing = sorted(name for name in linked if not (RESULTS / name).is_file())
    assert not missing, f"linked but not in benchmarks/results/: {missing}"
