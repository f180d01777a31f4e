"""The ground floor: settings, errors, paths, metrics and progress; imports nothing above it."""
