"""The compile command of one source file of a CMake build, for the bench scripts that read a .cu file's build
(ptxas_usage.py, cuda_code_size.py)."""
import json
import os
import shlex
import sys


def compile_entry(build, source):
    """(arguments, directory) of `source`'s entry in BUILD/compile_commands.json; exits when it has none."""
    commands = json.load(open(os.path.join(build, "compile_commands.json")))
    entry = next((e for e in commands if e["file"].endswith(source)), None)
    if entry is None:
        sys.exit("%s is not in %s/compile_commands.json" % (source, build))
    return shlex.split(entry["command"]), entry["directory"]
