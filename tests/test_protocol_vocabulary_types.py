"""The generated TypeScript types a field whose words are a vocabulary by the vocabulary's type (`outcome:
BuildOutcome | null`), not by an inline union of the same words: a word added to trtls.core.vocabulary reaches every
interface through the one `const` array the extension parses against."""

from __future__ import annotations

from trtls.schema.protocol import TS_FILE
from trtls.schema.protocol_ts import vocabularies


def test_no_interface_spells_a_vocabulary_out() -> None:
    text = TS_FILE.read_text(encoding="utf-8")
    fields = [line.strip() for line in text.splitlines() if line.startswith("  ") and ":" in line]
    spelled = []
    for name, words in vocabularies().items():
        union = " | ".join(f"'{w}'" for w in words)
        spelled += [f"{name}: {f}" for f in fields if union in f]
    assert spelled == []


def test_the_fields_of_the_vocabularies_name_them() -> None:
    """What the extension reads most: a build's outcome and its kind, a phase's status, a stop's source."""
    text = TS_FILE.read_text(encoding="utf-8")
    for field in ("outcome: BuildOutcome | null;", "outcomeKind: OutcomeKind;", "status: PhaseStatus;",
                  "source: CancelSource;"):  # fmt: skip
        assert f"  {field}" in text, field
