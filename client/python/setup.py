"""Generates the gRPC stubs (spexd/v1/spexd_pb2*.py) when they are not there yet, i.e. in
a source-tree install, with protoc and Debian's grpc_python_plugin (before setuptools
lists the packages: spexd.v1 must exist for the metadata too); the build tree's python/
already has them. Everything else is in pyproject.toml."""
import os
import shutil
import subprocess

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))


def ensure_stubs():
    v1 = os.path.join(HERE, "spexd", "v1")
    if os.path.exists(os.path.join(v1, "spexd_pb2.py")):
        return
    proto_root = os.path.join(HERE, "..", "..", "proto")
    plugin = shutil.which("grpc_python_plugin")
    if not (shutil.which("protoc") and plugin and os.path.isdir(proto_root)):
        raise RuntimeError("generating the gRPC stubs needs protoc and grpc_python_plugin "
                           "(Debian: protobuf-compiler, protobuf-compiler-grpc) and "
                           "../../proto; or install from the build tree's python/")
    os.makedirs(v1, exist_ok=True)
    open(os.path.join(v1, "__init__.py"), "a").close()
    subprocess.run(["protoc", f"-I{proto_root}", f"--python_out={HERE}",
                    f"--grpc_python_out={HERE}", f"--plugin=protoc-gen-grpc_python={plugin}",
                    os.path.join(proto_root, "spexd", "v1", "spexd.proto")], check=True)


ensure_stubs()
setup()
