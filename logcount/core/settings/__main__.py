"""`python -m logcount.core.settings`: print the README's configuration reference."""

from logcount.core.settings.reference import reference_markdown

print(reference_markdown())
