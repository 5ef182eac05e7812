"""Model-call records from LangChain callbacks (SPEC §8): what the fake model got equals model_input."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from agent_sessions.integrations.langchain import DjangoChatMessageHistory, to_langchain
from agent_sessions.integrations.langchain_calls import ModelCallRecorder
from agent_sessions.models import ModelCallContent

pytestmark = [
    pytest.mark.django_db(transaction=True),  # langchain may save and call back from another thread
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


class SeeingModel(GenericFakeChatModel):
    """The fake model, remembering what it was given on each call."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def sent_back(model_input: dict) -> list[BaseMessage]:
    """The recorded input rendered as LangChain messages, as the history renders stored rows."""
    return [m for message in model_input["messages"] for m in to_langchain(message)]


def test_each_call_records_exactly_what_the_model_got(session_id):
    replies = iter([AIMessage("Kyoto: rain.", id="r1"), AIMessage("Osaka: sun.", id="r2")])
    model = SeeingModel(messages=replies, seen=[])
    history = DjangoChatMessageHistory(session_id)
    recorder = ModelCallRecorder(history)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Weather bot."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model, lambda session_id: history, input_messages_key="question", history_messages_key="history"
    )
    config = {"configurable": {"session_id": session_id}, "callbacks": [recorder]}
    chain.invoke({"question": "Kyoto?"}, config=config)
    chain.invoke({"question": "Osaka?"}, config=config)

    session = history.store.session
    calls = session.model_calls()
    assert [c["status"] for c in calls] == ["ok", "ok"]
    stored = {m.content: mid for mid, m in ((m["id"], to_langchain(m)[-1]) for m in session.get_history())}
    assert [c["message_id"] for c in calls] == [stored["Osaka: sun."], stored["Kyoto: rain."]]
    for call, seen in zip(reversed(calls), model.seen, strict=True):
        recorded = session.model_input(call["message_id"])
        assert sent_back(recorded) == seen  # field by field: LangChain messages compare every field
        assert recorded["model"] == "SeeingModel"
    # The second call's history came from the store: referenced, not copied.
    second = session.model_input(stored["Osaka: sun."])
    assert [m.content for m in sent_back(second)] == ["Weather bot.", "Kyoto?", "Kyoto: rain.", "Osaka?"]
    kinds = sorted(ModelCallContent.objects.filter(session_id=session_id).values_list("kind", flat=True))
    assert kinds == ["head", "sent", "sent", "tools"]  # the system message once; each new question by value


def test_a_failing_model_is_recorded_as_an_error(session_id):
    class Broken(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("provider down")

    history = DjangoChatMessageHistory(session_id)
    recorder = ModelCallRecorder(history, model="broken-1")
    with pytest.raises(RuntimeError, match="provider down"):
        Broken(messages=iter([])).invoke("hi", config={"callbacks": [recorder]})
    [call] = history.store.session.model_calls()
    assert (call["status"], call["error"], call["model"], call["message_id"]) == (
        "error",
        "provider down",
        "broken-1",
        None,
    )
