"""Writes tests/fixtures/chat_template/cases.json: reference chat-template renderings.

Dev-only (never run by CI). Regenerate with:

    python tools/reference/make_chat_template_fixtures.py \
        ~/.cache/refgeo/models/SmolLM2-135M-Instruct.Q4_1.gguf tests/fixtures/chat_template/cases.json
    python tools/reference/make_chat_template_fixtures.py \
        ~/.cache/refgeo/models/Qwen2.5-Coder-0.5B-Instruct.gguf tests/fixtures/chat_template/qwen_cases.json \
        --source Qwen/Qwen2.5-Coder-0.5B-Instruct --only-gguf

Every rendering comes from transformers' own Jinja machinery
(transformers.utils.chat_template_utils.render_jinja_template: the same
ImmutableSandboxedEnvironment with trim_blocks/lstrip_blocks and
raise_exception that apply_chat_template uses). The SmolLM2 template is read
from the GGUF's tokenizer.chat_template and rendered through a tokenizer loaded
from that GGUF (AutoTokenizer.from_pretrained(..., gguf_file=...)), i.e. exactly
tokenizer.apply_chat_template(tokenize=False). The other families' official
templates are given below as strings with the place each was taken from;
--only-gguf leaves them out (the second model's file holds its own template
only). --source names the model the GGUF template came from.

Output JSON: {"templates": [{family, template_source, source, template,
bos_token, eos_token}], "cases": [{family, template_source, messages,
add_generation_prompt, expected, error}]}; expected is null (and error holds
the template's exception text) where the official template raises.
"""
import argparse
import itertools
import json
import os
import shutil
import tempfile

import gguf
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import render_jinja_template

# ---------------------------------------------------------------- official templates
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
    "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)
ZEPHYR = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
)
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
GEMMA = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)
QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# (family, template_source, source, template, bos_token, eos_token)
OFFICIAL = [
    ("llama-2", "meta-llama/Llama-2-7b-chat-hf", "tokenizer_config.json chat_template of meta-llama/Llama-2-7b-chat-hf "
     "(https://huggingface.co/meta-llama/Llama-2-7b-chat-hf/blob/main/tokenizer_config.json#L12), as quoted in "
     "OptimalScale/LMFlow docs/source/examples/supported_conversation_template.md", LLAMA2, "<s>", "</s>"),
    ("mistral", "mistralai/Mistral-7B-Instruct-v0.1", "original tokenizer_config.json chat_template of "
     "mistralai/Mistral-7B-Instruct-v0.1 (no system role), as quoted in EricLBuehler/mistral.rs's test_chat_templates",
     MISTRAL, "<s>", "</s>"),
    ("zephyr", "HuggingFaceH4/zephyr-7b-beta", "tokenizer_config.json chat_template of HuggingFaceH4/zephyr-7b-beta, "
     "the DEFAULT_CHAT_TEMPLATE of huggingface/alignment-handbook (src/alignment/model_utils.py) it was trained with",
     ZEPHYR, "<s>", "</s>"),
    ("llama-3", "meta-llama/Meta-Llama-3-8B-Instruct", "tokenizer_config.json chat_template of "
     "meta-llama/Meta-Llama-3-8B-Instruct (current revision, with the add_generation_prompt guard; revision 2b724926 "
     "quoted in OptimalScale/LMFlow's supported_conversation_template.md lacks the guard)", LLAMA3,
     "<|begin_of_text|>", "<|eot_id|>"),
    ("gemma", "google/gemma-2b-it", "tokenizer_config.json chat_template of google/gemma-2b-it (same text as "
     "gemma-7b-it's, quoted in EricLBuehler/mistral.rs's test_chat_templates)", GEMMA, "<bos>", "<eos>"),
    ("chatml", "Qwen/Qwen2-0.5B-Instruct", "tokenizer_config.json chat_template of Qwen/Qwen2-0.5B-Instruct (same "
     "text as Qwen1.5-Chat's, quoted in huggingface swift-jinja tests testQwenQwen1_5_72BChat)", QWEN2,
     "", "<|im_end|>"),
]

# ---------------------------------------------------------------- conversations
SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer briefly."}
TURNS = [
    {"role": "user", "content": "What is the capital of France?"},
    # Padded with whitespace: llama-2 strips, llama-3/gemma trim, the others keep it.
    {"role": "assistant", "content": "  The capital of France is Paris.\n "},
    # Unicode whitespace (NBSP, ideographic space) that Python's str.strip also removes.
    {"role": "user", "content": "\u00a0And of Japan? \u3000"},
]
EXTRA = {
    "system_only": [SYSTEM],
    "user_user": [TURNS[0], {"role": "user", "content": "Please answer."}],
    "assistant_first": [TURNS[1], TURNS[0]],
    "empty_system": [{"role": "system", "content": ""}, TURNS[0]],
}


def conversations():
    for n, with_system in itertools.product((1, 2, 3), (False, True)):
        msgs = ([SYSTEM] if with_system else []) + TURNS[:n]
        yield f"{n}turn{'_system' if with_system else ''}", msgs
    yield from EXTRA.items()


def render(template, msgs, gen, bos, eos):
    try:
        out, _ = render_jinja_template(conversations=[msgs], chat_template=template, add_generation_prompt=gen,
                                       bos_token=bos, eos_token=eos)
        return out[0], None
    except Exception as e:  # raise_exception -> jinja2 TemplateError
        return None, str(e)


def gguf_tokenizer(gguf_path):
    # AutoTokenizer wants a directory and a file name inside it.
    d = tempfile.mkdtemp()
    os.symlink(os.path.abspath(gguf_path), os.path.join(d, "model.gguf"))
    try:
        return AutoTokenizer.from_pretrained(d, gguf_file="model.gguf")
    finally:
        shutil.rmtree(d)


def main(gguf_path, out_path, model_source, only_gguf):
    reader = gguf.GGUFReader(gguf_path)
    field = reader.fields["tokenizer.chat_template"]
    gguf_template = bytes(field.parts[field.data[0]]).decode("utf-8")
    tok = gguf_tokenizer(gguf_path)
    assert tok.chat_template == gguf_template

    templates = [{"family": "chatml", "template_source": model_source + " (GGUF)",
                  "source": "tokenizer.chat_template of " + os.path.basename(gguf_path),
                  "template": gguf_template, "bos_token": "", "eos_token": tok.eos_token}]
    if not only_gguf:
        templates += [{"family": f, "template_source": ts, "source": s, "template": t, "bos_token": b,
                       "eos_token": e} for f, ts, s, t, b, e in OFFICIAL]

    cases = []
    for t in templates:
        for (name, msgs), gen in itertools.product(conversations(), (False, True)):
            if t is templates[0]:
                try:
                    expected, error = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen), None
                except Exception as e:
                    expected, error = None, str(e)
                # Same string through the shared renderer, as a check on the setup.
                assert (expected, error) == render(t["template"], msgs, gen, tok.bos_token, tok.eos_token)
            else:
                expected, error = render(t["template"], msgs, gen, t["bos_token"], t["eos_token"])
            cases.append({"family": t["family"], "template_source": t["template_source"], "conversation": name,
                          "messages": msgs, "add_generation_prompt": gen, "expected": expected, "error": error})

    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"templates": templates, "cases": cases}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{out_path}: {len(templates)} templates, {len(cases)} cases "
          f"({sum(c['error'] is not None for c in cases)} raise)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("out")
    ap.add_argument("--source", default="HuggingFaceTB/SmolLM2-135M-Instruct",
                    help="the model the GGUF's template came from (names it in the fixture)")
    ap.add_argument("--only-gguf", action="store_true", help="leave out the other families' official templates")
    args = ap.parse_args()
    main(args.gguf, args.out, args.source, args.only_gguf)
