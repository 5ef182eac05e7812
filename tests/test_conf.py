"""App settings are read once and re-read after Django reports a change (conf.get's cache)."""

from __future__ import annotations

from django.test import override_settings

from agent_sessions import conf


def test_a_setting_change_is_seen_after_a_first_read(settings):
    assert conf.max_parts() == conf.DEFAULTS["MAX_PARTS"]
    settings.AGENT_SESSIONS_MAX_PARTS = 7  # pytest-django sends setting_changed
    assert conf.max_parts() == 7
    with override_settings(AGENT_SESSIONS_MAX_PARTS=3):
        assert conf.max_parts() == 3
    assert conf.max_parts() == 7
    del settings.AGENT_SESSIONS_MAX_PARTS
    assert conf.max_parts() == conf.DEFAULTS["MAX_PARTS"]


def test_other_settings_do_not_drop_the_values_read():
    conf.max_parts()
    assert "MAX_PARTS" in conf._read
    with override_settings(USE_TZ=True):
        assert "MAX_PARTS" in conf._read


def test_a_worker_finds_the_apis_configuration_without_naming_it_in_settings(settings):
    """The app registers the JSON API's configuration module with the registry; conf names none."""
    from agent_sessions import registry
    from agent_sessions.api import config

    settings.AGENT_SESSIONS_CONFIG_MODULES = ["tests.sessions_registry", "tests.sessions_registry"]
    assert conf.config_modules() == ["tests.sessions_registry"]
    assert config.DEFAULT_NAME in registry.names()
