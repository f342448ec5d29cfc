import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Sparse scatter-add, the core of an embedding table's backward: the gradient rows of all lookups are summed
    into the rows they were looked up from, `out[indices[i]] += grad[i]`, into a table of `num_rows` rows that
    starts at zero. Accumulation is in float32 and the output is float32 whatever the input precision (as a
    mixed-precision trainer accumulates gradients), so rows hit many times do not lose low-order bits.

    Indices follow a Zipf(1.15) law over the rows (FBGEMM's recommended training skew), so a few hot rows receive
    a large share of the updates (the hottest about 17%) and many rows receive none. Rows with no update are 0.
    Summation order is free: the result is defined up to float32 rounding of a sum in any order.
    """

    def __init__(self, num_rows: int):
        """
        Args:
            num_rows (int): rows of the output table.
        """
        super(Model, self).__init__()
        self.num_rows = num_rows

    def forward(self, grad: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        """
        Args:
            grad (torch.Tensor): one gradient row per lookup, shape (num_indices, embedding_dim).
            indices (torch.Tensor): int64 destination row of each gradient row, shape (num_indices,), values in
                [0, num_rows).

        Returns:
            torch.Tensor: float32, shape (num_rows, embedding_dim).
        """
        out = torch.zeros(self.num_rows, grad.shape[1], dtype=torch.float32, device=grad.device)
        return out.index_add_(0, indices, grad.to(torch.float32))


num_rows = 65_536
embedding_dim = 128
num_indices = 524_288
zipf_alpha = 1.15


def get_inputs():
    grad = torch.randn(num_indices, embedding_dim)
    # Zipf ranks (rank r drawn with probability proportional to r ** -alpha), then a random permutation maps
    # ranks to rows so the hot rows are scattered over the table rather than packed at its start.
    rank_weights = torch.arange(1, num_rows + 1, dtype=torch.float64).pow(-zipf_alpha)
    ranks = torch.multinomial(rank_weights, num_indices, replacement=True)
    indices = torch.randperm(num_rows)[ranks]
    return [grad, indices]


def get_init_inputs():
    return [num_rows]
