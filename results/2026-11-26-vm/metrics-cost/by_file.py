#!/usr/bin/env python3
"""Self cost (instructions) per source file in a callgrind output, inlined code included
(callgrind's fi=/fe= records): how many instructions the code of each file executed.

usage: by_file.py CALLGRIND_OUT[.gz] [PATTERN...]   (prints files whose path contains a PATTERN)
"""
import gzip
import re
import sys
from collections import Counter

names = {}


def name(kind, text):
    match = re.match(r"\((\d+)\)(?: (.*))?", text)
    if not match:
        return text
    key = (kind, match.group(1))
    if match.group(2) is not None:
        names[key] = match.group(2)
    return names.get(key, "?")


cost = Counter()
current = inline = None
skip_next = False
opener = gzip.open if sys.argv[1].endswith(".gz") else open
with opener(sys.argv[1], "rt") as handle:
    for line in handle:
        line = line.rstrip("\n")
        if line.startswith("fl="):
            current = name("fl", line[3:])
            inline = None
        elif line.startswith(("fi=", "fe=")):
            inline = name("fl", line[3:])
        elif line.startswith("fn="):
            inline = None
        elif line.startswith("calls="):
            skip_next = True
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if skip_next:
                skip_next = False
                continue
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                cost[inline or current] += int(parts[1])
        elif line.startswith(("cfi=", "cfl=", "cfn=", "cob=")):
            if line.startswith(("cfi=", "cfl=")):
                name("fl", line[4:])
patterns = sys.argv[2:]
total = sum(cost.values())
for path, instructions in cost.most_common():
    if not patterns or any(pattern in path for pattern in patterns):
        print(f"{instructions}\t{path}")
print(f"{total}\t(total)")
