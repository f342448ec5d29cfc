import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Top-k selection for the ranking stage of a recommender: for each query, the k highest-scoring of
    `num_items` candidates, values in descending order together with their item indices (`torch.topk`,
    sorted). Among tied scores any index with the selected value is acceptable.
    """

    def __init__(self, k: int):
        """
        Args:
            k (int): candidates kept per query.
        """
        super(Model, self).__init__()
        self.k = k

    def forward(self, scores: torch.Tensor):
        """
        Args:
            scores (torch.Tensor): shape (batch_size, num_items).

        Returns:
            tuple[torch.Tensor, torch.Tensor]: values, shape (batch_size, k), dtype of `scores`, descending along
            the last dimension; indices, int64, shape (batch_size, k), with scores.gather(1, indices) == values.
        """
        return torch.topk(scores, self.k, dim=-1, largest=True, sorted=True)


batch_size = 2048
num_items = 100_000
k = 100


def get_inputs():
    scores = torch.randn(batch_size, num_items)
    return [scores]


def get_init_inputs():
    return [k]
