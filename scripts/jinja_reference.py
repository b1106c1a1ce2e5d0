#!/usr/bin/python3
"""Renders a Jinja template the way transformers renders chat templates, for the differential test.

usage: jinja_reference.py TEMPLATE_FILE CONTEXTS_FILE
CONTEXTS_FILE holds a JSON list; each entry's "vars" object is passed to render() as keyword arguments.
Prints a JSON list with {"text": ...} or {"error": ...} per entry.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: F401  (transformers' class; see below)


class GenerationTracker(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def main():
    template_path, contexts_path = sys.argv[1], sys.argv[2]
    with open(template_path, encoding="utf-8") as f:
        source = f.read()
    with open(contexts_path, encoding="utf-8") as f:
        contexts = json.load(f)
    # A plain Environment (not transformers' immutable sandbox) so list.append patterns render too.
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=[GenerationTracker, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    results = []
    try:
        template = env.from_string(source)
    except Exception as e:  # a syntax error fails every context
        print(json.dumps([{"error": f"{type(e).__name__}: {e}"} for _ in contexts]))
        return
    for ctx in contexts:
        try:
            results.append({"text": template.render(**ctx["vars"])})
        except Exception as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
