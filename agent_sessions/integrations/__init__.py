"""Adapters that let agent frameworks keep their history in agent_sessions.

Each module is an optional extra and imports its framework on import:

* :mod:`agent_sessions.integrations.openai_agents` (``pip install django-agent-sessions[openai-agents]``)
* :mod:`agent_sessions.integrations.langchain` (``pip install django-agent-sessions[langchain]``)
* :mod:`agent_sessions.integrations.pydantic_ai` (``pip install django-agent-sessions[pydantic-ai]``)

See ``docs/integrations.md`` for what maps to what.
"""
