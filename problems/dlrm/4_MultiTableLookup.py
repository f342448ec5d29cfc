import torch
import torch.nn as nn


class Model(nn.Module):
    """
    The embedding layer of a DLRM on Criteo: 26 sum-pooled embedding tables, one lookup per table, the pooled
    vectors concatenated along features (as DLRM builds one `nn.EmbeddingBag` per table and concatenates their
    outputs before the interaction).

    Each table t has a fixed pooling factor L_t (MLPerf DLRM v2's multi-hot sizes), so its bags need no offsets:
    columns [c_t, c_t + L_t) of `indices`, where c_t = L_0 + ... + L_{t-1}, hold sample b's L_t row ids into
    table t (ids local to the table). The tables are parameters, initialised N(0, 1) (`nn.EmbeddingBag`'s default)
    in table order.
    """

    def __init__(self, num_embeddings_per_table: list, embedding_dim: int, pooling_factors: list):
        """
        Args:
            num_embeddings_per_table (list[int]): rows of each table.
            embedding_dim (int): width of every table.
            pooling_factors (list[int]): lookups per sample into each table, same length as the table list.
        """
        super(Model, self).__init__()
        assert len(num_embeddings_per_table) == len(pooling_factors)
        self.pooling_factors = list(pooling_factors)
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(rows, embedding_dim, mode="sum") for rows in num_embeddings_per_table
        )

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            indices (torch.Tensor): int64, shape (batch_size, sum(pooling_factors)); table t's block of columns
                holds row ids in [0, rows of table t).

        Returns:
            torch.Tensor: shape (batch_size, num_tables * embedding_dim); columns
                [t * embedding_dim, (t + 1) * embedding_dim) are table t's sum-pooled rows.
        """
        per_table = torch.split(indices, self.pooling_factors, dim=1)
        return torch.cat([table(ids) for table, ids in zip(self.tables, per_table)], dim=1)


# Criteo Kaggle cardinalities, in table order (facebookresearch/dlrm tools/visualize.py).
criteo_kaggle_rows = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
    27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
]
# MLPerf DLRM v2 multi-hot sizes (lookups per sample), in table order: 214 per sample.
multi_hot_sizes = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
max_table_rows = 1_000_000
embedding_dim = 128
batch_size = 8192


def _table_rows():
    return [min(rows, max_table_rows) for rows in criteo_kaggle_rows]


def get_inputs():
    # One block of uniform row ids per table (26 draws, no per-sample loop).
    blocks = [
        torch.randint(0, rows, (batch_size, lookups))
        for rows, lookups in zip(_table_rows(), multi_hot_sizes)
    ]
    return [torch.cat(blocks, dim=1)]


def get_init_inputs():
    return [_table_rows(), embedding_dim, multi_hot_sizes]
