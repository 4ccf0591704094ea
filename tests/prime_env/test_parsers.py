"""Strict parsers: malformed documents are never a match (verifiers#116, #207)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from prime_env import BoxedParser, LastLineParser, XMLParser

xml = XMLParser(["think", "answer"])
safe_text = st.text(alphabet=st.characters(blacklist_characters="<>{}\\"), max_size=40)


def assistant(text: str) -> list[dict]:
    return [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]


def test_xml_well_formed() -> None:
    text = "<think>\nhmm\n</think>\n<answer> 42 </answer>"
    assert xml.parse(text) == {"think": "hmm", "answer": "42"}
    assert xml.parse_answer(assistant(text)) == "42"
    assert xml.format_reward(assistant(text)) == 1.0


def test_xml_malformed_is_no_match() -> None:
    for bad in [
        "<answer>42",  # unclosed
        "<answer>42</think>",  # mismatched close
        "42</answer>",  # close without open
        "<think><answer>42</answer></think>",  # nested fields
        "<answer>1</answer><answer>2</answer>",  # repeated
        "<think>x</think><answer>4<answer>2</answer>",
    ]:
        assert xml.parse_answer(bad) is None, bad
        assert xml.format_reward(assistant(bad)) == 0.0, bad


def test_xml_missing_required_field_fails_format_but_parses_answer() -> None:
    assert xml.parse_answer("<answer>7</answer>") == "7"
    assert xml.format_reward(assistant("<answer>7</answer>")) == 0.0


def test_parsers_read_the_last_assistant_message() -> None:
    msgs = [
        {"role": "assistant", "content": "<answer>1</answer>"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "<answer>2</answer>"},
        {"role": "tool", "content": "<answer>3</answer>"},
    ]
    assert XMLParser().parse_answer(msgs) == "2"
    assert XMLParser().parse_answer([{"role": "user", "content": "x"}]) is None


@given(think=safe_text, answer=safe_text)
def test_xml_roundtrip_property(think: str, answer: str) -> None:
    text = xml.format(think=think, answer=answer)
    assert xml.parse(text) == {"think": think.strip(), "answer": answer.strip()}


@given(prefix=safe_text, answer=safe_text, cut=st.integers(min_value=1, max_value=9))
def test_xml_truncated_closing_tag_never_matches(prefix: str, answer: str, cut: int) -> None:
    text = f"{prefix}<answer>{answer}</answer>"
    truncated = text[: len(text) - cut]  # any cut into the closing tag leaves it unclosed
    assert XMLParser().parse_answer(truncated) is None


def test_boxed() -> None:
    p = BoxedParser()
    assert p.parse_answer(r"so \boxed{\frac{1}{2}} done") == r"\frac{1}{2}"
    assert p.parse_answer(r"\boxed{1} then \boxed{2}") == "2"
    assert p.parse_answer(r"\boxed{\frac{1}{2}") is None
    assert p.parse_answer("no box") is None


@given(body=safe_text, cut=st.integers(min_value=1, max_value=5))
def test_boxed_unbalanced_never_matches(body: str, cut: int) -> None:
    text = r"\boxed{" + body + "}" * 1
    assert BoxedParser().parse_answer(text) == body.strip()
    assert BoxedParser().parse_answer(text[:-1]) is None


def test_last_line() -> None:
    assert LastLineParser().parse_answer("work\n\n  42  \n") == "42"
    p = LastLineParser(prefix="Answer:")
    assert p.parse_answer("reasoning\nAnswer: 7") == "7"
    assert p.parse_answer("Answer: 7\nmore text") is None
    assert p.parse_answer("Answer:") is None
    assert p.format_reward(assistant("x\nAnswer: 1")) == 1.0
