"""logcount/bench/soak_sampling.py's pure parts: jcmd's heap, native memory and class
histogram, the stage's /metrics and the figures of an interval between two scrapes."""

import http.server
import os
import threading

from logcount.bench import soak_sampling

# `jcmd PID GC.heap_info` of JDK 17, as printed for a stage's driver (Parallel GC) and for the
# embedded broker (G1), address ranges shortened; the first line is jcmd's own "PID:".
PARALLEL = """11105:
 PSYoungGen      total 638464K, used 136284K [0x00000000d5580000, 0x0000000100000000, ...)
  eden space 580096K, 23% used [0x00000000d5580000,0x00000000dda97138,0x00000000f8c00000)
  from space 58368K, 0% used [0x00000000fc700000,0x00000000fc700000,0x0000000100000000)
  to   space 59392K, 0% used [0x00000000f8c00000,0x00000000f8c00000,0x00000000fc600000)
 ParOldGen       total 258048K, used 62786K [0x0000000080000000, 0x000000008fc00000, ...)
  object space 258048K, 24% used [0x0000000080000000,0x0000000083d50868,0x000000008fc00000)
 Metaspace       used 33113K, committed 34304K, reserved 1114112K
  class space    used 4868K, committed 5504K, reserved 1048576K
"""
G1 = """21962:
 garbage-first heap   total 832512K, used 514195K [0x00000000c0000000, 0x0000000100000000)
  region size 1024K, 179 young (183296K), 2 survivors (2048K)
 Metaspace       used 54178K, committed 55424K, reserved 1114112K
  class space    used 6304K, committed 6848K, reserved 1048576K
"""


def test_heap_info_of_parallel_gc_sums_its_generations():
    got = soak_sampling.parse_heap_info(PARALLEL)
    # PSYoungGen + ParOldGen; eden, from, to and object space are parts of them, not summed
    assert got["heap_used_mb"] == round((136284 + 62786) / 1024, 1)
    assert got["heap_committed_mb"] == round((638464 + 258048) / 1024, 1)
    assert got["metaspace_used_mb"] == round(33113 / 1024, 1)
    assert got["metaspace_committed_mb"] == round(34304 / 1024, 1)
    assert got["class_space_used_mb"] == round(4868 / 1024, 1)


def test_heap_info_of_g1_and_of_nothing():
    got = soak_sampling.parse_heap_info(G1)
    assert got["heap_used_mb"] == round(514195 / 1024, 1)
    assert got["heap_committed_mb"] == round(832512 / 1024, 1)
    assert got["metaspace_used_mb"] == round(54178 / 1024, 1)
    assert soak_sampling.parse_heap_info("12345:\nCommand executed successfully\n") == {}


def test_metrics_sum_label_sets_and_skip_comments():
    text = """# HELP logcount_batches_committed_total batches committed
# TYPE logcount_batches_committed_total counter
logcount_batches_committed_total 120.0
logcount_batches_committed_created 1.7e+09
logcount_input_lag_records{partition="0"} 100.0
logcount_input_lag_records{partition="1"} 50.0
logcount_batch_spark_seconds_bucket{le="0.1"} 3.0
logcount_batch_spark_seconds_sum 12.5
logcount_batch_spark_seconds_count 120.0
"""
    got = soak_sampling.parse_metrics(text)
    assert got["logcount_batches_committed_total"] == 120
    assert got["logcount_input_lag_records"] == 150
    assert got["logcount_batch_spark_seconds_sum"] == 12.5


def test_interval_figures_are_deltas_between_scrapes():
    prev = {"logcount_batches_committed_total": 100, "logcount_batch_spark_seconds_sum": 10.0,
            "logcount_batch_spark_seconds_count": 100, "logcount_batch_commit_seconds_sum": 1.0,
            "logcount_batch_commit_seconds_count": 100}
    cur = {"logcount_batches_committed_total": 250, "logcount_batch_spark_seconds_sum": 25.0,
           "logcount_batch_spark_seconds_count": 250, "logcount_batch_commit_seconds_sum": 2.5,
           "logcount_batch_commit_seconds_count": 250}
    assert soak_sampling.interval_figures(prev, cur, 15.0) == {
        "batches": 150, "batch_spark_ms": 100.0, "batch_commit_ms": 10.0, "batch_cycle_ms": 100.0}
    none = soak_sampling.interval_figures(cur, cur, 15.0)
    assert none["batches"] == 0 and none["batch_spark_ms"] is None
    assert none["batch_cycle_ms"] is None


NMT = """30988:

Native Memory Tracking:

(Omitting categories weighting less than 1KB)

Total: reserved=7842510KB, committed=484726KB
       malloc: 10118KB #61056
       mmap:   reserved=7832392KB, committed=474608KB

-                 Java Heap (reserved=6172672KB, committed=397312KB)
                            (mmap: reserved=6172672KB, committed=397312KB)

-                     Class (reserved=1048783KB, committed=1359KB)
                            (classes #2498)
                            (malloc=207KB #3913) (at peak)

-                    Thread (reserved=19506KB, committed=890KB)
                            (thread #19)
                            (stack: reserved=19456KB, committed=840KB)
"""
HISTOGRAM = """30988:
 num     #instances         #bytes  class name (module)
-------------------------------------------------------
   1:         13043         794352  [B (java.base@17.0.15)
   2:          3002         360856  java.lang.Class (java.base@17.0.15)
   3:            40           1280  org.apache.spark.sql.X$$Lambda$123/0x0000000800c01234
Total         16085        1156488
"""


def test_native_memory_summary_per_category():
    got = soak_sampling.parse_nmt(NMT)
    assert got == {"Total": round(484726 / 1024, 1), "Java Heap": 388.0,
                   "Class": round(1359 / 1024, 1), "Thread": round(890 / 1024, 1)}


def test_class_histogram():
    first = soak_sampling.parse_histogram(HISTOGRAM)
    assert first["[B"] == (13043, 794352) and len(first) == 3
    assert first["org.apache.spark.sql.X$$Lambda$123/0x0000000800c01234"] == (40, 1280)


def test_a_row_from_proc_and_a_scrape_of_the_stage(tmp_path):
    """No JVM: the row has this process's /proc figures and the interval's batch figures."""
    body = (b"logcount_batches_committed_total 30.0\n"
            b'logcount_input_lag_records{partition="0"} 7.0\n'
            b'logcount_input_lag_records{partition="1"} 5.0\n')

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    with http.server.HTTPServer(("127.0.0.1", 0), Metrics) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        sampler = soak_sampling.Sampler(tmp_path, nmt=False)
        row = sampler.sample(15.0, os.getpid(), None, server.server_address[1],
                             {"logcount_batches_committed_total": 10.0}, 5.0)
        server.shutdown()
    assert row["python_rss_mb"] > 0 and row["jvm_rss_mb"] is None
    assert row["batches"] == 20 and row["batch_cycle_ms"] == 500.0
    assert row["input_lag_records"] == 12 and row["state_minutes"] is None
    assert row["_metrics"]["logcount_batches_committed_total"] == 30
    assert sampler.jcmd_s == [] and sampler.histograms == []


# `jcmd PID GC.heap_info` (Serial GC, the paced stage's) and `Compiler.codecache` of JDK 17
# (the heap's addresses printed 16 digits wide there).
SERIAL_AND_CODE = """1522:
 def new generation   total 44288K, used 15776K [0xf0000000, 0xf3000000, 0xf3000000)
  eden space 39424K,  40% used [0xf0000000, 0xf0f68398, 0xf2680000)
 tenured generation   total 212992K, used 0K [0xf3000000, 0x100000000, 0x100000000)
   the space 212992K,   0% used [0xf3000000, 0xf3000000, 0xf3000200, 0x100000000)
 Metaspace       used 8953K, committed 9152K, reserved 1114112K
1522:
CodeHeap 'non-profiled nmethods': size=120036Kb used=317Kb max_used=317Kb free=119718Kb
 bounds [0x00007f26c4ec7000, 0x00007f26c5137000, 0x00007f26cc400000]
CodeHeap 'non-nmethods': size=5692Kb used=1640Kb max_used=1689Kb free=4051Kb
 bounds [0x00007f26c4c00000, 0x00007f26c4e70000, 0x00007f26c4ec7000]
 total_blobs=9571 nmethods=8510 adapters=974
"""


def _mapping(start: int, end: int, path: str, rss_kb: int) -> str:
    return (f"{start:x}-{end:x} rw-p 00000000 00:00 0          {path}\n"
            f"Size:   {(end - start) // 1024} kB\nRss:   {rss_kb} kB\nPss:   {rss_kb} kB\n"
            "VmFlags: rd wr mr mw me ac\n")


def test_ranges_of_the_heap_and_the_code_cache_from_jcmd():
    got = soak_sampling.jvm_ranges(SERIAL_AND_CODE)
    # each generation's reserved range, not its sub-spaces; each code heap's
    assert got["heap"] == [(0xF0000000, 0xF3000000), (0xF3000000, 0x100000000)]
    assert got["code"] == [(0x7F26C4EC7000, 0x7F26CC400000), (0x7F26C4C00000, 0x7F26C4EC7000)]
    assert soak_sampling.jvm_ranges(G1)["heap"] == [(0xC0000000, 0x100000000)]
    assert soak_sampling.jvm_ranges("") == {"heap": [], "code": []}


def test_rss_by_region_puts_each_mapping_where_it_starts():
    ranges = soak_sampling.jvm_ranges(SERIAL_AND_CODE)
    smaps = "".join([
        _mapping(0xF0000000, 0xF1000000, "", 10240),  # young generation
        _mapping(0xF3000000, 0xF4000000, "", 2048),  # tenured
        _mapping(0x7F26C4C00000, 0x7F26C4C10000, "", 64),  # non-nmethods code heap
        _mapping(0x7F26C4EC7000, 0x7F26C5137000, "", 1024),  # compiled code
        _mapping(0x800000000, 0x801000000, "/work/.cache/jars/cds/spark-driver-x.jsa", 3072),
        _mapping(0x7F26D0000000, 0x7F26D0100000, "/usr/lib/jvm/lib/server/libjvm.so", 512),
        _mapping(0x7F26E0000000, 0x7F26E4000000, "", 4096),  # a malloc arena
        _mapping(0x7FFD00000000, 0x7FFD00021000, "[stack]", 128),
        _mapping(0x7F26CC400000, 0x7F26CC500000, "", 256),  # just past the code cache
    ])
    got = soak_sampling.rss_by_region(smaps, ranges)
    assert got == {"heap": 12.0, "code": 1.1, "cds": 3.0, "files": 0.5,
                   "other": round((4096 + 128 + 256) / 1024, 1)}
    # without the JVM's ranges every anonymous mapping is "other"
    assert soak_sampling.rss_by_region(smaps, {})["other"] == round(
        (10240 + 2048 + 64 + 1024 + 4096 + 128 + 256) / 1024, 1)
