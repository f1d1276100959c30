#!/usr/bin/env python3
"""Adds to each case of tests/data/chat_templates/renderings.json the text Python's jinja2 renders
when set up as transformers sets it up for apply_chat_template (an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, its tojson, raise_exception and strftime_now, loop controls),
as "python_rendered" / "python_error". Where it differs from @huggingface/jinja's rendering
(render_chat_templates.mjs --corpus), the models were trained on Python's: meshtrain follows it.

  python3 scripts/render_chat_templates_py.py tests/data/chat_templates/renderings.json [DIR]
DIR holds the templates that are not kept in the project (see the file's note)."""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def environment(now):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def main():
    path = sys.argv[1]
    extra = sys.argv[2] if len(sys.argv) > 2 else None
    root = os.path.join(os.path.dirname(path), "..", "..", "..")
    doc = json.load(open(path, encoding="utf-8"))
    now = datetime.datetime.fromtimestamp(doc["strftime_now_epoch"], datetime.timezone.utc)
    env = environment(now)
    sources = {}
    for name, t in doc["templates"].items():
        if "file" in t:
            sources[name] = open(os.path.join(root, t["file"]), encoding="utf-8").read()
        elif "tokenizer_config" in t:
            sources[name] = json.load(open(os.path.join(root, t["tokenizer_config"]), encoding="utf-8"))["chat_template"]
        elif extra and os.path.exists(os.path.join(extra, name + ".jinja")):
            sources[name] = open(os.path.join(extra, name + ".jinja"), encoding="utf-8").read()
    differ = 0
    for c in doc["cases"]:
        if c["template"] not in sources:
            continue
        c.pop("python_rendered", None)
        c.pop("python_error", None)
        try:
            text = env.from_string(sources[c["template"]]).render(**c["context"])
            if text != c.get("rendered"):
                c["python_rendered"] = text
                differ += 1
        except Exception as e:  # the template refused the conversation
            if "error" not in c:
                c["python_error"] = str(e)
                differ += 1
    json.dump(doc, open(path, "w", encoding="utf-8"), ensure_ascii=False, indent=1)
    open(path, "a").write("\n")
    print(f"{path}: {differ} cases where Python's jinja2 differs from @huggingface/jinja")


main()
