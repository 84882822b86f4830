"""Reads the per-block clock stamps of the seesaw-fp8 body's pair 4 (from a
diagnostic build: testing/gpu/seesaw_fp8_stamps.patch, the e4m3fn seesaw-fp8
instance, the last launch's blocks) and prints the median timeline of a
pair: each producer part's start, the end of its wait for the buffer part
and its arrival once stored; each consumer's waits, scores, releases and
exchanges; all in cycles from the pair's start on the producer.

  git apply testing/gpu/seesaw_fp8_stamps.patch && bazel build --config=cuda \
      --dynamic_mode=off -c opt //attention/gpu/sparse_mla:bench; \
      git apply -R testing/gpu/seesaw_fp8_stamps.patch
  DSA_SEESAW_STAMPS_FILE=s.bin sparse_mla_bench --mode=decode --cache=fp8 \
      --paths=seesaw-fp8 ...; python3 seesaw_fp8_stamps.py s.bin
"""
import statistics
import struct
import sys

NAMES = {
    3: "producer part 0 (buffer 0, atoms 0-3): start",
    4: "  its buffer free (wait done)",
    5: "  stored and announced",
    6: "producer part 1 (buffer 1, atoms 4-8): start",
    7: "  its buffer free",
    8: "  stored and announced",
    9: "producer part 2 (buffer 0, atoms 4-8): start",
    10: "  its buffer free",
    11: "  stored and announced",
    12: "producer part 3 (buffer 1, atoms 0-3): start",
    13: "  its buffer free",
    14: "  stored and announced",
    15: "producer: the next pair's start",
    16: "consumer 0: part 0 ready (wait done)",
    17: "consumer 0: part 2 ready",
    18: "consumer 0: scores done",
    19: "consumer 0: own values done, buffer 0 part 0 released",
    20: "consumer 0: consumer 1's maxima in, P0 stored",
    21: "consumer 0: P1 ready (sync done)",
    22: "consumer 0: other values done, buffer 1 part 0 released",
    24: "consumer 1: part 1 ready",
    25: "consumer 1: part 3 ready",
    26: "consumer 1: scores done",
    27: "consumer 1: consumer 0's maxima in",
    28: "consumer 1: P0 ready (sync done)",
    29: "consumer 1: own values done, buffer 1 part 1 released",
    30: "consumer 1: other values done, buffer 0 part 1 released",
}


def main(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<I", data, 0)
    st = struct.unpack_from("<%dQ" % (n * 32), data, 4)
    blocks = [st[32 * b:32 * b + 32] for b in range(n)]
    blocks = [b for b in blocks if b[2] and b[15]]
    print("blocks with pair 4 and 5 stamped: %d of %d" % (len(blocks), n))
    if not blocks:
        return
    life = [b[31] - b[0] for b in blocks if b[31]]
    print("whole block, median cycles: %d" % statistics.median(life))
    for k in sorted(NAMES):
        xs = [b[k] - b[2] for b in blocks if b[k]]
        if xs:
            print("%6d  %s" % (statistics.median(xs), NAMES[k]))


if __name__ == "__main__":
    main(sys.argv[1])
