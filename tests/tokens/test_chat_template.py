"""Chat templates render as transformers renders them, and hostile ones end as one line: loops, huge
output, huge allocations, raise_exception, sandbox escapes, syntax errors; time and memory bounded."""

from __future__ import annotations

import pytest
from tokenfixtures import write_tokenizer

from eaglekit.core.tokens.chat_template import TemplateLimitError
from eaglekit.core.errors import InputError
from eaglekit.io.tokens.templates import read_template, render_bounded

CHAT = [[{"role": "system", "content": "be brief"}, {"role": "user", "content": "w1 w2"}]]
LLAMA_LIKE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] | trim }}{{ eos_token }}"
              "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def test_renders_what_transformers_renders(tmp_path):
    from transformers import AutoTokenizer

    folder = write_tokenizer(tmp_path / "t", eos="w11", template=LLAMA_LIKE)
    tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    variables = {k: v for k, v in tok.special_tokens_map.items() if isinstance(v, str)}
    for gen in (True, False):
        ours = render_bounded(LLAMA_LIKE, CHAT, add_generation_prompt=gen, variables=variables)
        assert ours == [tok.apply_chat_template(CHAT[0], add_generation_prompt=gen, tokenize=False)]


def test_transformers_globals_and_tags():
    t = ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
         "{{ ns.n }} {{ messages[0] | tojson }} {% generation %}{{ dict(a=1)['a'] }}{% endgeneration %}"
         "{% for i in range(5) %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}")
    assert render_bounded(t, CHAT) == ['2 {"role": "system", "content": "be brief"} 101']


@pytest.mark.parametrize("template,kind,message", [
    ("{{ 'x' * 3000000000 }}", TemplateLimitError, "needed more memory"),
    ("{% set n = 3000000000 %}{{ 'x' * n }}", TemplateLimitError, "needed more memory"),
    ("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
     TemplateLimitError, "needed more memory"),
    ("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}", TemplateLimitError, "renders more than 4,194,304"),
    ("{{ raise_exception('System role not supported') }}", InputError, "raised an error: System role not supported"),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", InputError, "the sandbox refuses"),
    ("{% set ns = namespace(_x=1) %}", InputError, "the sandbox refuses"),
    ("{{ messages.append(1) }}", InputError, "the sandbox refuses"),
    ("{% for %}", InputError, "not a valid Jinja template"),
    ("{{ messages[5]['content'] }}", InputError, "raised an error"),
])
def test_hostile_templates_are_one_line(template, kind, message):
    with pytest.raises(kind, match=message) as e:
        render_bounded(template, CHAT, what="T")
    assert "\n" not in str(e.value) and str(e.value).startswith("T ")


def test_a_template_that_never_ends_is_stopped_by_its_work_not_the_clock():
    """10^10 empty iterations: cut after MAX_TEMPLATE_STEPS lines of template code, whatever the machine's
    load (the clock, 600 s here, is never what stops it)."""
    from eaglekit.core.tokens.chat_template import MAX_TEMPLATE_STEPS

    loop = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    with pytest.raises(TemplateLimitError, match=f"ran more than {MAX_TEMPLATE_STEPS:,} steps of template code"):
        render_bounded(loop, CHAT, timeout=600)
    macro = "{% macro f(n) %}{% for i in range(100000) %}{% endfor %}{% endmacro %}" \
            "{% for i in range(100000) %}{{ f(i) }}{% endfor %}"
    with pytest.raises(TemplateLimitError, match="steps of template code"):
        render_bounded(macro, CHAT, timeout=600)


def test_the_step_count_is_per_prompt_and_real_templates_stay_far_below_it():
    from eaglekit.core.tokens.chat_template import render

    long_chat = [[{"role": "user" if i % 2 else "assistant", "content": f"m{i}"} for i in range(1000)]] * 3
    out = render(LLAMA_LIKE, long_chat, max_steps=100_000)          # 1,000 messages: far under the cap
    assert len(out) == 3 and all("m999" in t for t in out)
    with pytest.raises(TemplateLimitError, match="more than 1,000 steps"):
        render(LLAMA_LIKE, long_chat, max_steps=1_000)


def test_the_clock_still_stops_a_template_whose_steps_are_slow():
    slow = "{% for i in range(100000) %}{% set x = ('a' * (20000000 + i)) | length %}{% endfor %}"
    with pytest.raises(TemplateLimitError, match="still rendering after 2 s"):
        render_bounded(slow, CHAT, timeout=2)


def test_template_files_are_read_with_their_size_checked(tmp_path):
    big = tmp_path / "big.jinja"
    with open(big, "wb") as f:
        f.truncate(100 << 20)
    with pytest.raises(InputError, match="larger than 1,048,576 bytes"):
        read_template(big)
    with pytest.raises(InputError, match="no such chat template file"):
        read_template(tmp_path / "none.jinja")
    (tmp_path / "latin.jinja").write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="not UTF-8"):
        read_template(tmp_path / "latin.jinja")
    with pytest.raises(InputError, match="larger than"):
        render_bounded("x" * (2 << 20), CHAT)


def test_a_targets_own_template_renders_bounded_too(tmp_path):
    """Messages prompts rendered with the target tokenizer's own template go through the same sandbox."""
    from transformers import AutoTokenizer

    from eaglekit.analysis.acceptance.target import TargetModel
    from eaglekit.core.acceptance.prompts import Prompt

    class Model:  # only what TargetModel reads
        class config:
            num_hidden_layers, hidden_size, vocab_size, max_position_embeddings = 1, 4, 12, 64

    folder = write_tokenizer(tmp_path / "t", eos="w11", template=LLAMA_LIKE)
    tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    target = TargetModel(Model(), tok, name="t")
    chat = Prompt("messages", [{"role": "user", "content": "w1 w2"}], 1)
    want = tok.apply_chat_template(chat.value, add_generation_prompt=True, tokenize=True)
    want = list(want["input_ids"] if hasattr(want, "keys") else want)
    assert target.tokenize_all([chat], source="p", max_new_tokens=4) == [want]
    tok.chat_template = "{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}"
    with pytest.raises(TemplateLimitError, match="t's chat template renders more than"):
        target.tokenize_all([chat], source="p", max_new_tokens=4)
