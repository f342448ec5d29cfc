import torch
import torch.nn as nn


class Model(nn.Module):
    """
    DLRM's dot interaction (`interact_features` with `arch_interaction_op="dot"`, no self-interaction): the dense
    vector and the pooled sparse embeddings of each sample are stacked into F = num_sparse_features + 1 feature
    vectors, every pair is dotted, and the strictly-lower triangle of the F x F Gram matrix (F(F-1)/2 values,
    row-major: (1,0), (2,0), (2,1), (3,0), ...) is appended to the dense vector.

    With 26 sparse features and width 128 the output has 128 + 351 = 479 columns, the input width of MLPerf
    DLRM's top MLP.
    """

    def __init__(self, num_sparse_features: int):
        """
        Args:
            num_sparse_features (int): pooled embeddings per sample (tables).
        """
        super(Model, self).__init__()
        num_features = num_sparse_features + 1
        rows, cols = torch.tril_indices(num_features, num_features, offset=-1)
        self.register_buffer("tri_rows", rows, persistent=False)
        self.register_buffer("tri_cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """
        Args:
            dense (torch.Tensor): bottom-MLP output, shape (batch_size, embedding_dim).
            sparse (torch.Tensor): pooled embeddings, shape (batch_size, num_sparse_features, embedding_dim).

        Returns:
            torch.Tensor: shape (batch_size, embedding_dim + F(F-1)/2) with F = num_sparse_features + 1: the
            dense vector, then the pairwise dot products.
        """
        features = torch.cat([dense.unsqueeze(1), sparse], dim=1)
        gram = torch.bmm(features, features.transpose(1, 2))
        return torch.cat([dense, gram[:, self.tri_rows, self.tri_cols]], dim=1)


batch_size = 16384
num_sparse_features = 26
embedding_dim = 128


def get_inputs():
    dense = torch.randn(batch_size, embedding_dim)
    sparse = torch.randn(batch_size, num_sparse_features, embedding_dim)
    return [dense, sparse]


def get_init_inputs():
    return [num_sparse_features]
