"""The package index's long description: README.md with its relative links made plain text.

An index page has no repository to resolve `docs/install.md` against, so such a link would break there. Each one
becomes its text plus the path, which the source distribution and the repository hold. Everything else is in
setup.cfg.
"""

import re

from setuptools import setup

_RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?![a-z]+://|#)([^)\s]+)\)")


def long_description() -> str:
    with open("README.md", encoding="utf-8") as f:
        text = f.read()
    return _RELATIVE_LINK.sub(
        lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m.group(1)} ({m.group(2)})", text
    )


setup(long_description=long_description(), long_description_content_type="text/markdown")
