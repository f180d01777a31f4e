"""The driver JVM's version-dependent options (pipeline/jdk.py): which JDK takes the native heap
trim, read from its `release` file; and this machine's JDK started with what the stage adds."""

from __future__ import annotations

from pathlib import Path

import pytest

from logcount.pipeline.jdk import (
    TRIM_INTERVAL_MS,
    java_home,
    native_trim_option,
    release_facts,
    trims_native_heap,
)
from tests.support.jvm import final_flags

DEBIAN_17 = '''IMPLEMENTOR="Debian"
JAVA_RUNTIME_VERSION="17.0.15+6-Debian-1deb12u1"
JAVA_VERSION="17.0.15"
JAVA_VERSION_DATE="2025-04-15"
LIBC="gnu"
OS_ARCH="x86_64"
OS_NAME="Linux"
SOURCE=""
'''


def test_release_facts_reads_quoted_and_empty_values():
    facts = release_facts(DEBIAN_17 + "not a fact\n")
    assert facts["JAVA_VERSION"] == "17.0.15" and facts["LIBC"] == "gnu"
    assert facts["SOURCE"] == "" and "not a fact" not in facts


@pytest.mark.parametrize(("version", "trims"), [
    ("17", False), ("17.0.8", False), ("17.0.11", False), ("17.0.12", True), ("17.0.15", True),
    ("18.0.2", False), ("20.0.2", False),
    ("21", False), ("21.0.3", False), ("21.0.4", True), ("21.0.9", True),
    ("22", False), ("22.0.1", False), ("22.0.2", True),
    ("23", True), ("25.0.3", True), ("26", True),
    ("", False), ("1.8.0_412", False), ("banana", False),
])
def test_the_trim_flag_is_given_only_to_jdks_with_it_as_a_product_flag(version, trims):
    """An older JDK refuses to start on an unknown -XX flag, and the first 17.0.x and 21.0.x
    backports had it experimental (also a refusal without -XX:+UnlockExperimentalVMOptions)."""
    assert trims_native_heap({"JAVA_VERSION": version, "OS_NAME": "Linux",
                              "LIBC": "gnu"}) is trims


@pytest.mark.parametrize("facts", [
    {"JAVA_VERSION": "21.0.5", "OS_NAME": "Linux", "LIBC": "musl"},  # Alpine: no malloc_trim
    {"JAVA_VERSION": "21.0.5", "OS_NAME": "Darwin"},
    {"JAVA_VERSION": "21.0.5", "OS_NAME": "Windows"},
    {"JAVA_VERSION": "21.0.5"},  # no OS in the file: not known to be Linux
])
def test_no_trim_where_the_jvm_would_only_warn(facts):
    assert not trims_native_heap(facts)


def test_a_linux_release_without_libc_is_glibc():
    assert trims_native_heap({"JAVA_VERSION": "21.0.5", "OS_NAME": "Linux"})


def test_the_option_follows_the_release_file(tmp_path: Path):
    (tmp_path / "release").write_text(DEBIAN_17)
    assert native_trim_option(tmp_path) == f"-XX:TrimNativeHeapInterval={TRIM_INTERVAL_MS}"
    (tmp_path / "release").write_text(DEBIAN_17.replace("17.0.15", "17.0.8"))
    assert native_trim_option(tmp_path) == ""
    assert native_trim_option(tmp_path / "no-such-jdk") == ""  # no release file: no flag


def test_java_home_is_javas_as_pysparks_launcher_picks_it(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert java_home() == tmp_path
    monkeypatch.delenv("JAVA_HOME")
    home = java_home()
    assert home is not None and (home / "bin" / "java").exists()


def test_this_machines_jdk_starts_with_what_the_paced_stage_adds():
    """The real JVM: the option the stage derives for this JDK (CI's 17.0.15 has it) starts, and
    the interval is the one HotSpot runs with."""
    option = native_trim_option()
    if not option:
        pytest.skip(f"this machine's JDK ({java_home()}) has no product trim flag")
    assert final_flags(option)["TrimNativeHeapInterval"] == str(TRIM_INTERVAL_MS)
