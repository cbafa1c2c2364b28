"""What Python package a plugin EP library comes from: distribution, module, version and SDK version.

Discovery reads these from the packages it imports (plugins.discover_plugin_packages). A library given
by path (``--ep-library``, the env var, or a child process that is handed paths and discovers nothing)
is read here from the package folder that holds the file: the top-level module of that folder, if it is
the one this Python imports, and the distribution that installs it. A library in no such folder has no
package facts, and ``package_holding`` says why instead.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

SDK_VERSION_ATTRS = ("qnn_version", "sdk_version", "openvino_version", "dawn_version")


def module_version(module: Any) -> str | None:
    info = getattr(module, "build_and_package_info", None)
    found: str | None = getattr(module, "__version__", None) or getattr(info, "__version__", None)
    return found


def sdk_version(module: Any) -> str | None:
    """The SDK the plugin was built against (``onnxruntime_qnn.build_and_package_info.qnn_version``)."""
    info = getattr(module, "build_and_package_info", None)
    for attr in SDK_VERSION_ATTRS:
        value = getattr(info, attr, None) or getattr(module, attr, None)
        if isinstance(value, str):
            return value
    return None


def _top_package_folder(library: Path) -> Path | None:
    """The outermost folder with an ``__init__.py`` among the library's parents, unbroken from its own."""
    top = None
    for folder in library.parents:
        if not (folder / "__init__.py").is_file():
            break
        top = folder
    return top


def _distribution_of(module_name: str) -> tuple[str | None, str | None]:
    names = importlib.metadata.packages_distributions().get(module_name) or []
    if not names:
        return None, None
    return names[0], importlib.metadata.version(names[0])


@functools.cache
def package_holding(library_path: str) -> tuple[dict[str, Any] | None, str | None]:
    """(package facts, None) for a library inside an installed Python package, else (None, why not)."""
    library = Path(library_path).resolve()
    top = _top_package_folder(library)
    if top is None:
        return None, f"{library} lies in no Python package folder (no __init__.py beside it)"
    name = top.name
    spec = importlib.util.find_spec(name) if name.isidentifier() else None
    locations = [Path(p).resolve() for p in (spec.submodule_search_locations or ())] if spec else []
    if top not in locations:
        return None, f"{top} is not the module {name!r} this Python imports, so its package cannot be read"
    try:
        module = importlib.import_module(name)
        dist, version = _distribution_of(name)
    except Exception as exc:  # a broken package: say so in the record rather than fail the run
        return None, f"module {name} (holding {library.name}) failed to import: {type(exc).__name__}: {exc}"
    facts = {
        "package": dist or name,
        "module": name,
        "version": version or module_version(module),
        "sdk_version": sdk_version(module),
    }
    return facts, None
