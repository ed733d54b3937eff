"""Packaging tests: the ``slow`` marker they use."""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: builds or installs something; minutes, not seconds")
