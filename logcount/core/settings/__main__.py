"""`python -m logcount.core.settings`: print the configuration reference (docs/configuration.md)."""

from logcount.core.settings.reference import reference_markdown

print(reference_markdown())
