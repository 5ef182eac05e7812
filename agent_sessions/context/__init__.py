"""Context blocks: providers, the block snapshot, prompt rendering, skills and the context tools."""

from .block import ContextBlock
from .block_set import BlockSet, BlockSpec
from .providers import DjangoContextProvider, DjangoSearchProvider, StaticProvider
from .storage_skills import StorageSkillProvider

__all__ = [
    "BlockSpec",
    "ContextBlock",
    "BlockSet",
    "DjangoContextProvider",
    "DjangoSearchProvider",
    "StaticProvider",
    "StorageSkillProvider",
]
