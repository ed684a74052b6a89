# The package's version. It is the workspace's one version (Cargo.toml [workspace.package]);
# release/build.sh refuses to build when they differ.
__version__ = "0.1.0"
