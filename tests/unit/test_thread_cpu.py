"""The pure part of tools/thread_cpu.py: CPU between two samples, by thread family."""

from tools.thread_cpu import family, per_family


def test_a_pool_number_is_dropped_from_a_thread_name():
    assert family("C2 CompilerThre0") == "C2 CompilerThre"
    assert family("Executor task l") == "Executor task l"
    assert family("GC Thread#1") == "GC Thread"
    assert family("rdk:broker-1") == "rdk:broker"
    assert family("42") == "42"  # nothing but a number: kept


def test_cpu_between_samples_is_summed_by_family_and_a_new_thread_counts_from_zero():
    before = {("java", "C2 CompilerThre0", 10): 5.0, ("java", "C2 CompilerThre1", 11): 1.0,
              ("python", "python", 1): 2.0}
    after = {("java", "C2 CompilerThre0", 10): 5.5, ("java", "C2 CompilerThre1", 11): 1.25,
             ("java", "C2 CompilerThre2", 12): 0.25, ("python", "python", 1): 2.0}
    assert per_family(before, after) == {("java", "C2 CompilerThre"): 1.0,
                                         ("python", "python"): 0.0}
