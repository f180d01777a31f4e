"""Fixtures of the integration tier only."""

import pytest


@pytest.fixture(scope="package")
def spark():
    """The stage's own local session (spark_session, as `logcount run` makes it), shared by this
    tier's tests that run plans in this process: one JVM start, stopped when the tier is done."""
    from logcount.pipeline.spark import spark_session

    session = spark_session("local[2]", "logcount-test")
    yield session
    session.stop()
