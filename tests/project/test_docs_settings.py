"""Every setting read from the environment is named in the README's configuration table."""

import re

from django.conf import settings

_ENV_READ = re.compile(r'env(?:\.\w+)?\(\s*"([A-Z][A-Z0-9_]+)"')


def test_every_environment_setting_is_in_the_readme():
    names = set(_ENV_READ.findall((settings.BASE_DIR / "crowdbench/settings.py").read_text()))
    readme = (settings.BASE_DIR / "README.md").read_text()
    assert len(names) > 50
    assert sorted(name for name in names if f"`{name}`" not in readme) == []
