"""The package API that model cards and the README use (`from playground.package import load_package`): kept here
so those imports work whatever the package layout inside; the code lives in playground/packages/."""

from playground.packages.format import Package, read_config
from playground.packages.store import check_package, list_packages, load_package, package_info, save_package
from playground.packages.zips import export_zip, import_zip

__all__ = ["Package", "check_package", "export_zip", "import_zip", "list_packages", "load_package", "package_info",
           "read_config", "save_package"]
