"""Builds the package out of the source tree: setuptools' build/ and spexd.egg-info go to a
temporary folder (removed at exit), not beside these sources, and the gRPC stubs
(spexd/v1/spexd_pb2*.py), where they are not there already (a source-tree install; the
build tree's python/ has them), are generated with protoc and Debian's grpc_python_plugin
into that folder too. Everything else is in pyproject.toml."""
import atexit
import os
import shutil
import subprocess
import tempfile

from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
SCRATCH = tempfile.mkdtemp(prefix="spexd-setup-")
atexit.register(shutil.rmtree, SCRATCH, True)


def stub_dir():
    """The folder holding spexd.v1 (the package's own, or one generated in SCRATCH)."""
    v1 = os.path.join(HERE, "spexd", "v1")
    if os.path.exists(os.path.join(v1, "spexd_pb2.py")):
        return v1
    proto_root = os.path.join(HERE, "..", "..", "proto")
    plugin = shutil.which("grpc_python_plugin")
    if not (shutil.which("protoc") and plugin and os.path.isdir(proto_root)):
        raise RuntimeError("generating the gRPC stubs needs protoc and grpc_python_plugin "
                           "(Debian: protobuf-compiler, protobuf-compiler-grpc) and "
                           "../../proto; or install from the build tree's python/")
    gen = os.path.join(SCRATCH, "gen")
    os.makedirs(os.path.join(gen, "spexd", "v1"))
    open(os.path.join(gen, "spexd", "v1", "__init__.py"), "w").close()
    subprocess.run(["protoc", f"-I{proto_root}", f"--python_out={gen}",
                    f"--grpc_python_out={gen}", f"--plugin=protoc-gen-grpc_python={plugin}",
                    os.path.join(proto_root, "spexd", "v1", "spexd.proto")], check=True)
    return os.path.join(gen, "spexd", "v1")


setup(package_dir={"spexd.v1": os.path.relpath(stub_dir(), HERE)},
      options={"build": {"build_base": os.path.join(SCRATCH, "build")},
               "egg_info": {"egg_base": SCRATCH}})
