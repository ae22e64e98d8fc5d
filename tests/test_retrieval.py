import math
from collections import Counter

from r3con.notes.retrieval import (
    BM25,
    cosine_scores,
    ranking,
    reciprocal_rank_fusion,
    tokenize,
    within_budget,
)
from r3con.notes.selection import terms


def test_tokenize_lowercases_words_and_splits_cjk_characters():
    assert tokenize("Zinc, 412 tonnes; Antwerp-bound") == ["zinc", "412", "tonnes", "antwerp", "bound"]
    assert tokenize("英力特的公允价值 2023年") == ["英", "力", "特", "的", "公", "允", "价", "值", "2023", "年"]
    assert tokenize("abc中文") == ["abc", "中", "文"]


def test_bm25_ranks_rare_matching_terms_first():
    texts = ["the cat sat on the mat", "a dog barked at the cat", "zinc shipments from antwerp", "the the the"]
    bm25 = BM25(texts)
    scores = bm25.scores("zinc from Antwerp")
    assert scores[2] > 0 and all(s == 0 for i, s in enumerate(scores) if i != 2)
    assert bm25.top_k("cat", 2) == [0, 1]  # the shorter text with the term ranks first
    assert bm25.top_k("nothing matches", 3) == [0, 1, 2]  # ties keep text order
    assert len(bm25) == 4


def test_bm25_term_frequency_saturates_and_length_normalises():
    bm25 = BM25(["apple " * 1 + "pear " * 9, "apple " * 5 + "pear " * 5, "apple " * 10])
    s = bm25.scores("apple")
    assert s[0] < s[1] < s[2]
    assert s[2] < 3 * s[0]  # saturation: ten times the term is far from ten times the score


def test_bm25_works_on_chinese():
    bm25 = BM25(["公司的营业收入增长", "天气很好", "公允价值变动收益"])
    assert bm25.top_k("公允价值变动", 1) == [2]


def test_cosine_ranking_and_fusion():
    scores = cosine_scores([1.0, 0.0], [[0.0, 1.0], [1.0, 1.0], [2.0, 0.0], [0.0, 0.0]])
    assert scores[2] == 1.0 and math.isclose(scores[1], 1 / math.sqrt(2)) and scores[0] == 0 and scores[3] == 0
    assert ranking(scores) == [2, 1, 0, 3]
    assert reciprocal_rank_fusion([[0, 1, 2], [2, 1, 0]]) == [0, 2, 1]  # 0 and 2 tie above 1; ties by index
    assert reciprocal_rank_fusion([[1, 0, 2], [1, 2, 0]])[0] == 1


def test_within_budget_skips_what_does_not_fit_and_keeps_order():
    costs = [500, 300, 900, 100, 200]
    assert within_budget([2, 0, 1, 3, 4], costs, 1000) == [2, 3]
    assert within_budget([0, 1, 2, 3, 4], costs, 1000) == [0, 1, 3]
    assert within_budget([0, 1, 2, 3, 4], costs, 10_000, limit=2) == [0, 1]


def test_queries_sharing_a_first_line_score_as_if_each_were_scored_alone():
    from r3con.notes.selection import terms

    texts = ["Ann Lee lives in Oslo", "Bob Stone wrote to Ann", "Cara moved to Bergen", "Oslo and Bergen ships"]
    shared = BM25(texts, tokenize=terms, distinct_query_terms=True)
    for query in ("Who lives in Oslo?\nAnn wrote", "Who lives in Oslo?\nBergen ships Oslo", "Who lives in Oslo?",
                  "Where is Bergen?\nCara"):
        alone = BM25(texts, tokenize=terms, distinct_query_terms=True)
        assert shared.scores(query) == alone.scores(query)


def _per_term_scores(texts, query, k1, b, distinct):
    """BM25 one term at a time, as the index was built before its postings were flat: each term's weights
    in an array of its own, added per query term in the query's order."""
    import numpy as np

    counts = [Counter(terms(t)) for t in texts]
    lengths = np.array([sum(c.values()) for c in counts], dtype=float)
    norm = k1 * (1 - b + b * lengths / float(lengths.mean()))
    postings: dict[str, tuple[list[int], list[float]]] = {}
    for i, c in enumerate(counts):
        for term, n in c.items():
            postings.setdefault(term, ([], []))[0].append(i)
            postings[term][1].append(float(n))
    total = np.zeros(len(texts))
    asked = Counter(terms(query))
    for term, qf in (dict.fromkeys(asked, 1) if distinct else asked).items():
        if term in postings:
            idx, tf = np.array(postings[term][0]), np.array(postings[term][1])
            idf = math.log(1 + (len(texts) - len(idx) + 0.5) / (len(idx) + 0.5))
            weights = idf * tf * (k1 + 1) / (tf + norm[idx])
            total[idx] += weights if distinct else qf * weights
    return total


def test_bm25_scores_equal_those_of_one_term_at_a_time_to_the_bit():
    import random

    import numpy as np

    rng = random.Random(3)
    words = [f"w{i}" for i in range(300)] + ["港口", "船"]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 40))) for _ in range(500)]
    queries = [" ".join(rng.choices(words, k=12)) for _ in range(20)] + ["w1 w1 w1 w2", "nothing here"]
    for distinct in (False, True):
        index = BM25(texts, k1=1.2, tokenize=terms, distinct_query_terms=distinct)
        stored = BM25.from_counts([Counter(terms(t)) for t in texts], k1=1.2, tokenize=terms,
                                  distinct_query_terms=distinct)
        for query in queries:
            want = _per_term_scores(texts, query, 1.2, 0.75, distinct)
            assert np.array_equal(index.score_array(query), want) and np.array_equal(stored.score_array(query), want)
    assert BM25([], tokenize=terms).scores("w1") == []
