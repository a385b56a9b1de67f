"""Model zoo: PyTorch reference definitions (``trtbuild.models.pytorch``) and layer-by-layer builders."""
