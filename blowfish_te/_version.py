"""The library's version, in a leaf module: the strategy store keys its entries by it, and the
command line's ``--version`` prints it, without importing the package's upper floors."""

__version__ = "0.1.0"
