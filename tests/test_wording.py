"""What a user reads names the systems npukit comes from (the Torq EasyKernel guide, the
GAP AutoTiler, the AIE API, the TPP tensor compiler, the Compass DSL tutorial), never our
copies of their documents ("seed 000", "the seed's ..."). Random seeds are fine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from npukit.cli import main

ROOT = Path(__file__).parent.parent
USER_FACING = sorted(
    [*ROOT.glob("npukit/**/*.py"), *ROOT.glob("npukit/targets/*.toml"), *ROOT.glob("docs/*.md"),
     *ROOT.glob("examples/**/*.py"), *ROOT.glob("benchmarks/*.py"), ROOT / "README.md",
     ROOT / "CHANGELOG.md", ROOT / "pyproject.toml"])
SEED = re.compile(r"\bseed", re.IGNORECASE)
# A random seed: seed=..., --seed, seed(...), an rng or hypothesis's @seed.
RANDOM = re.compile(r"seed\s*[=(:]|--seed|\brng\b|random|hypothesis|@seed", re.IGNORECASE)


def document_references(text: str) -> list[str]:
    """Lines that speak of a source document as a "seed"."""
    return [line.strip() for line in text.splitlines()
            if SEED.search(line) and not RANDOM.search(line)]


def test_the_scan_tells_documents_from_random_seeds():
    bad = ["see seed 000", "Seed 001's generated code", "as the seed's kernel does",
           "(seeds 002, 003)", "def seed004_silu(x):", "a seed-000 kernel"]
    good = ["rng = np.random.default_rng(seed=3)", "parser.add_argument('--seed', type=int)",
            "@seed(1234)", "random.seed(0)"]
    assert document_references("\n".join(bad)) == bad
    assert document_references("\n".join(good)) == []


@pytest.mark.parametrize("path", USER_FACING, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_facing_text_names_systems_not_seeds(path):
    assert document_references(path.read_text()) == []


def test_help_texts_name_systems(capsys):
    for argv in (["--help"], ["demo", "--help"], ["targets", "--help"], ["lut", "--help"],
                 ["build", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert document_references(capsys.readouterr().out) == [], argv
    assert len(USER_FACING) > 50
