"""Write python_code/data/problems.jsonl from the problem definitions below.

Each problem: a function to write (`entry_point`), a description with its signature, hidden
`tests` (one assert per line, each run as its own test) and a `reference` solution. The
reference is shipped for the oracle check only; the model sees the description alone.

    python builtin_envs/python-code/scripts/build_problems.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "python_code" / "data" / "problems.jsonl"

# (entry_point, signature, description, reference body, tests)
PROBLEMS: list[tuple[str, str, str, str, list[str]]] = [
    (
        "add",
        "add(a: int, b: int) -> int",
        "Return the sum of a and b.",
        "def add(a, b):\n    return a + b\n",
        ["add(1, 2) == 3", "add(-5, 5) == 0", "add(0, 0) == 0", "add(10**20, 1) == 10**20 + 1"],
    ),
    (
        "reverse_words",
        "reverse_words(s: str) -> str",
        "Return the words of s in reverse order, separated by single spaces (ignore extra whitespace).",
        "def reverse_words(s):\n    return ' '.join(reversed(s.split()))\n",
        [
            "reverse_words('hello world') == 'world hello'",
            "reverse_words('  a  b   c ') == 'c b a'",
            "reverse_words('') == ''",
            "reverse_words('one') == 'one'",
        ],
    ),
    (
        "is_palindrome",
        "is_palindrome(s: str) -> bool",
        "Return True if s reads the same backwards, ignoring case and non-alphanumeric characters.",
        "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
        [
            "is_palindrome('A man, a plan, a canal: Panama') is True",
            "is_palindrome('race a car') is False",
            "is_palindrome('') is True",
            "is_palindrome('No lemon, no melon') is True",
        ],
    ),
    (
        "fizzbuzz",
        "fizzbuzz(n: int) -> list[str]",
        "Return the FizzBuzz strings for 1..n: 'Fizz' for multiples of 3, 'Buzz' for 5, 'FizzBuzz' for both, else the number.",
        "def fizzbuzz(n):\n    out = []\n    for i in range(1, n + 1):\n        s = ('Fizz' if i % 3 == 0 else '') + ('Buzz' if i % 5 == 0 else '')\n        out.append(s or str(i))\n    return out\n",
        [
            "fizzbuzz(5) == ['1', '2', 'Fizz', '4', 'Buzz']",
            "fizzbuzz(15)[-1] == 'FizzBuzz'",
            "fizzbuzz(0) == []",
            "len(fizzbuzz(100)) == 100",
        ],
    ),
    (
        "factorial",
        "factorial(n: int) -> int",
        "Return n! for n >= 0.",
        "def factorial(n):\n    out = 1\n    for i in range(2, n + 1):\n        out *= i\n    return out\n",
        [
            "factorial(0) == 1",
            "factorial(1) == 1",
            "factorial(5) == 120",
            "factorial(20) == 2432902008176640000",
        ],
    ),
    (
        "fibonacci",
        "fibonacci(n: int) -> int",
        "Return the n-th Fibonacci number with fibonacci(0) == 0 and fibonacci(1) == 1.",
        "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        [
            "fibonacci(0) == 0",
            "fibonacci(1) == 1",
            "fibonacci(10) == 55",
            "fibonacci(90) == 2880067194370816120",
        ],
    ),
    (
        "is_prime",
        "is_prime(n: int) -> bool",
        "Return True if n is a prime number.",
        "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True\n",
        [
            "is_prime(2) is True",
            "is_prime(1) is False",
            "is_prime(97) is True",
            "is_prime(91) is False",
            "is_prime(-7) is False",
            "is_prime(7919) is True",
        ],
    ),
    (
        "gcd",
        "gcd(a: int, b: int) -> int",
        "Return the greatest common divisor of a and b (non-negative; gcd(0, 0) == 0).",
        "def gcd(a, b):\n    a, b = abs(a), abs(b)\n    while b:\n        a, b = b, a % b\n    return a\n",
        [
            "gcd(12, 18) == 6",
            "gcd(17, 5) == 1",
            "gcd(0, 9) == 9",
            "gcd(0, 0) == 0",
            "gcd(-4, 6) == 2",
        ],
    ),
    (
        "count_vowels",
        "count_vowels(s: str) -> int",
        "Return how many characters of s are vowels (a, e, i, o, u, either case).",
        "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
        [
            "count_vowels('hello') == 2",
            "count_vowels('AEIOU') == 5",
            "count_vowels('rhythm') == 0",
            "count_vowels('') == 0",
        ],
    ),
    (
        "flatten",
        "flatten(items: list) -> list",
        "Flatten arbitrarily nested lists into one flat list, keeping order.",
        "def flatten(items):\n    out = []\n    for x in items:\n        if isinstance(x, list):\n            out.extend(flatten(x))\n        else:\n            out.append(x)\n    return out\n",
        [
            "flatten([1, [2, [3, [4]], 5]]) == [1, 2, 3, 4, 5]",
            "flatten([]) == []",
            "flatten([[], [[]]]) == []",
            "flatten(['a', ['b']]) == ['a', 'b']",
        ],
    ),
    (
        "two_sum",
        "two_sum(nums: list[int], target: int) -> tuple[int, int]",
        "Return the indices (i, j) with i < j of the two numbers that add up to target; exactly one pair exists.",
        "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n        if target - x in seen:\n            return (seen[target - x], j)\n        seen[x] = j\n",
        [
            "two_sum([2, 7, 11, 15], 9) == (0, 1)",
            "two_sum([3, 2, 4], 6) == (1, 2)",
            "two_sum([3, 3], 6) == (0, 1)",
            "two_sum([-1, -2, -3, -4, -5], -8) == (2, 4)",
        ],
    ),
    (
        "max_subarray",
        "max_subarray(nums: list[int]) -> int",
        "Return the largest sum of a non-empty contiguous subarray.",
        "def max_subarray(nums):\n    best = cur = nums[0]\n    for x in nums[1:]:\n        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best\n",
        [
            "max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6",
            "max_subarray([1]) == 1",
            "max_subarray([-3, -1, -2]) == -1",
            "max_subarray([5, 4, -1, 7, 8]) == 23",
        ],
    ),
    (
        "valid_parentheses",
        "valid_parentheses(s: str) -> bool",
        "Return True if every bracket in s ('()[]{}') is closed in the right order.",
        "def valid_parentheses(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack\n",
        [
            "valid_parentheses('()[]{}') is True",
            "valid_parentheses('(]') is False",
            "valid_parentheses('([)]') is False",
            "valid_parentheses('{[]}') is True",
            "valid_parentheses('((') is False",
            "valid_parentheses('') is True",
        ],
    ),
    (
        "roman_to_int",
        "roman_to_int(s: str) -> int",
        "Convert a Roman numeral (I, V, X, L, C, D, M) to an integer.",
        "def roman_to_int(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for i, c in enumerate(s):\n        if i + 1 < len(s) and v[c] < v[s[i + 1]]:\n            total -= v[c]\n        else:\n            total += v[c]\n    return total\n",
        [
            "roman_to_int('III') == 3",
            "roman_to_int('LVIII') == 58",
            "roman_to_int('MCMXCIV') == 1994",
            "roman_to_int('IV') == 4",
        ],
    ),
    (
        "int_to_roman",
        "int_to_roman(n: int) -> str",
        "Convert an integer 1..3999 to a Roman numeral.",
        "def int_to_roman(n):\n    table = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for value, sym in table:\n        while n >= value:\n            out += sym\n            n -= value\n    return out\n",
        [
            "int_to_roman(3) == 'III'",
            "int_to_roman(58) == 'LVIII'",
            "int_to_roman(1994) == 'MCMXCIV'",
            "int_to_roman(3999) == 'MMMCMXCIX'",
        ],
    ),
    (
        "anagrams",
        "anagrams(a: str, b: str) -> bool",
        "Return True if a and b contain the same letters, ignoring case and spaces.",
        "def anagrams(a, b):\n    norm = lambda s: sorted(s.replace(' ', '').lower())\n    return norm(a) == norm(b)\n",
        [
            "anagrams('Listen', 'Silent') is True",
            "anagrams('Dormitory', 'dirty room') is True",
            "anagrams('abc', 'abd') is False",
            "anagrams('', '') is True",
        ],
    ),
    (
        "run_length_encode",
        "run_length_encode(s: str) -> str",
        "Run-length encode s as count+char pairs, e.g. 'aaab' -> '3a1b'.",
        "def run_length_encode(s):\n    out = []\n    i = 0\n    while i < len(s):\n        j = i\n        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out.append(f'{j - i}{s[i]}')\n        i = j\n    return ''.join(out)\n",
        [
            "run_length_encode('aaab') == '3a1b'",
            "run_length_encode('') == ''",
            "run_length_encode('abc') == '1a1b1c'",
            "run_length_encode('zzzzzzzzzzzz') == '12z'",
        ],
    ),
    (
        "run_length_decode",
        "run_length_decode(s: str) -> str",
        "Decode count+char pairs (counts may have several digits), e.g. '3a1b' -> 'aaab'.",
        "import re\n\ndef run_length_decode(s):\n    return ''.join(c * int(n) for n, c in re.findall(r'(\\d+)(\\D)', s))\n",
        [
            "run_length_decode('3a1b') == 'aaab'",
            "run_length_decode('') == ''",
            "run_length_decode('12z') == 'z' * 12",
            "run_length_decode('1a1b1c') == 'abc'",
        ],
    ),
    (
        "chunk",
        "chunk(items: list, size: int) -> list[list]",
        "Split items into consecutive chunks of length size (the last may be shorter).",
        "def chunk(items, size):\n    return [items[i:i + size] for i in range(0, len(items), size)]\n",
        [
            "chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]",
            "chunk([], 3) == []",
            "chunk([1, 2], 5) == [[1, 2]]",
            "chunk(list(range(6)), 3) == [[0, 1, 2], [3, 4, 5]]",
        ],
    ),
    (
        "transpose",
        "transpose(matrix: list[list[int]]) -> list[list[int]]",
        "Return the transpose of a rectangular matrix.",
        "def transpose(matrix):\n    return [list(row) for row in zip(*matrix)]\n",
        [
            "transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]",
            "transpose([[1]]) == [[1]]",
            "transpose([]) == []",
            "transpose([[1, 2]]) == [[1], [2]]",
        ],
    ),
    (
        "word_count",
        "word_count(text: str) -> dict[str, int]",
        "Count occurrences of each lowercase word (split on whitespace, lowercase first).",
        "def word_count(text):\n    out = {}\n    for w in text.lower().split():\n        out[w] = out.get(w, 0) + 1\n    return out\n",
        [
            "word_count('a b a') == {'a': 2, 'b': 1}",
            "word_count('') == {}",
            "word_count('The the THE') == {'the': 3}",
        ],
    ),
    (
        "second_largest",
        "second_largest(nums: list[int]) -> int | None",
        "Return the second largest distinct value, or None if there is none.",
        "def second_largest(nums):\n    values = sorted(set(nums))\n    return values[-2] if len(values) >= 2 else None\n",
        [
            "second_largest([3, 1, 4, 4]) == 3",
            "second_largest([5, 5]) is None",
            "second_largest([]) is None",
            "second_largest([-1, -2]) == -2",
        ],
    ),
    (
        "binary_search",
        "binary_search(items: list[int], target: int) -> int",
        "Return the index of target in the sorted list items, or -1 if absent.",
        "import bisect\n\ndef binary_search(items, target):\n    i = bisect.bisect_left(items, target)\n    return i if i < len(items) and items[i] == target else -1\n",
        [
            "binary_search([1, 3, 5, 7], 5) == 2",
            "binary_search([1, 3, 5, 7], 4) == -1",
            "binary_search([], 1) == -1",
            "binary_search(list(range(0, 1000, 2)), 998) == 499",
        ],
    ),
    (
        "merge_sorted",
        "merge_sorted(a: list[int], b: list[int]) -> list[int]",
        "Merge two sorted lists into one sorted list.",
        "import heapq\n\ndef merge_sorted(a, b):\n    return list(heapq.merge(a, b))\n",
        [
            "merge_sorted([1, 3, 5], [2, 4]) == [1, 2, 3, 4, 5]",
            "merge_sorted([], [1]) == [1]",
            "merge_sorted([], []) == []",
            "merge_sorted([1, 1], [1]) == [1, 1, 1]",
        ],
    ),
    (
        "dedupe",
        "dedupe(items: list) -> list",
        "Remove duplicates from items, keeping the first occurrence of each value in order.",
        "def dedupe(items):\n    seen = set()\n    out = []\n    for x in items:\n        if x not in seen:\n            seen.add(x)\n            out.append(x)\n    return out\n",
        [
            "dedupe([3, 1, 3, 2, 1]) == [3, 1, 2]",
            "dedupe([]) == []",
            "dedupe(['a', 'A', 'a']) == ['a', 'A']",
        ],
    ),
    (
        "caesar",
        "caesar(s: str, shift: int) -> str",
        "Shift each ASCII letter by shift places (wrapping, keep case); other characters unchanged.",
        "def caesar(s, shift):\n    out = []\n    for c in s:\n        if 'a' <= c <= 'z':\n            out.append(chr((ord(c) - 97 + shift) % 26 + 97))\n        elif 'A' <= c <= 'Z':\n            out.append(chr((ord(c) - 65 + shift) % 26 + 65))\n        else:\n            out.append(c)\n    return ''.join(out)\n",
        [
            "caesar('abc', 1) == 'bcd'",
            "caesar('xyz', 3) == 'abc'",
            "caesar('Hello, World!', 13) == 'Uryyb, Jbeyq!'",
            "caesar('abc', -1) == 'zab'",
        ],
    ),
    (
        "digit_sum",
        "digit_sum(n: int) -> int",
        "Return the sum of the decimal digits of abs(n).",
        "def digit_sum(n):\n    return sum(int(d) for d in str(abs(n)))\n",
        [
            "digit_sum(123) == 6",
            "digit_sum(0) == 0",
            "digit_sum(-45) == 9",
            "digit_sum(10**10) == 1",
        ],
    ),
    (
        "is_armstrong",
        "is_armstrong(n: int) -> bool",
        "Return True if n equals the sum of its digits each raised to the number of digits (n >= 0).",
        "def is_armstrong(n):\n    d = str(n)\n    return n == sum(int(c) ** len(d) for c in d)\n",
        [
            "is_armstrong(153) is True",
            "is_armstrong(370) is True",
            "is_armstrong(10) is False",
            "is_armstrong(0) is True",
        ],
    ),
    (
        "pascal_row",
        "pascal_row(n: int) -> list[int]",
        "Return row n of Pascal's triangle (row 0 is [1]).",
        "def pascal_row(n):\n    row = [1]\n    for _ in range(n):\n        row = [a + b for a, b in zip([0] + row, row + [0])]\n    return row\n",
        [
            "pascal_row(0) == [1]",
            "pascal_row(1) == [1, 1]",
            "pascal_row(4) == [1, 4, 6, 4, 1]",
            "sum(pascal_row(10)) == 1024",
        ],
    ),
    (
        "matrix_multiply",
        "matrix_multiply(a: list[list[int]], b: list[list[int]]) -> list[list[int]]",
        "Return the matrix product a × b.",
        "def matrix_multiply(a, b):\n    return [[sum(x * y for x, y in zip(row, col)) for col in zip(*b)] for row in a]\n",
        [
            "matrix_multiply([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]",
            "matrix_multiply([[2]], [[3]]) == [[6]]",
            "matrix_multiply([[1, 0], [0, 1]], [[4, 5], [6, 7]]) == [[4, 5], [6, 7]]",
        ],
    ),
    (
        "capitalize_words",
        "capitalize_words(s: str) -> str",
        "Uppercase the first letter of every space-separated word and lowercase the rest.",
        "def capitalize_words(s):\n    return ' '.join(w[:1].upper() + w[1:].lower() for w in s.split(' '))\n",
        [
            "capitalize_words('hello world') == 'Hello World'",
            "capitalize_words('hELLO') == 'Hello'",
            "capitalize_words('') == ''",
            "capitalize_words('a  b') == 'A  B'",
        ],
    ),
    (
        "longest_common_prefix",
        "longest_common_prefix(words: list[str]) -> str",
        "Return the longest prefix shared by all words ('' for an empty list).",
        "import os\n\ndef longest_common_prefix(words):\n    return os.path.commonprefix(words) if words else ''\n",
        [
            "longest_common_prefix(['flower', 'flow', 'flight']) == 'fl'",
            "longest_common_prefix(['dog', 'car']) == ''",
            "longest_common_prefix([]) == ''",
            "longest_common_prefix(['same']) == 'same'",
        ],
    ),
    (
        "rotate_list",
        "rotate_list(items: list, k: int) -> list",
        "Rotate items to the right by k steps (k may exceed the length or be negative).",
        "def rotate_list(items, k):\n    if not items:\n        return []\n    k %= len(items)\n    return items[-k:] + items[:-k] if k else list(items)\n",
        [
            "rotate_list([1, 2, 3, 4, 5], 2) == [4, 5, 1, 2, 3]",
            "rotate_list([1, 2, 3], 4) == [3, 1, 2]",
            "rotate_list([], 3) == []",
            "rotate_list([1, 2, 3], -1) == [2, 3, 1]",
        ],
    ),
    (
        "prime_factors",
        "prime_factors(n: int) -> list[int]",
        "Return the prime factors of n >= 2 in ascending order, with repetition.",
        "def prime_factors(n):\n    out = []\n    p = 2\n    while p * p <= n:\n        while n % p == 0:\n            out.append(p)\n            n //= p\n        p += 1\n    if n > 1:\n        out.append(n)\n    return out\n",
        [
            "prime_factors(12) == [2, 2, 3]",
            "prime_factors(13) == [13]",
            "prime_factors(360) == [2, 2, 2, 3, 3, 5]",
            "prime_factors(9973 * 9967) == [9967, 9973]",
        ],
    ),
    (
        "balanced_split",
        "balanced_split(nums: list[int]) -> bool",
        "Return True if nums can be cut at one index into a non-empty prefix and suffix with equal sums.",
        "def balanced_split(nums):\n    total = sum(nums)\n    acc = 0\n    for x in nums[:-1]:\n        acc += x\n        if 2 * acc == total:\n            return True\n    return False\n",
        [
            "balanced_split([1, 2, 3]) is True",
            "balanced_split([1, 1, 1]) is False",
            "balanced_split([5]) is False",
            "balanced_split([0, 0]) is True",
        ],
    ),
    (
        "snake_to_camel",
        "snake_to_camel(s: str) -> str",
        "Convert snake_case to camelCase ('my_var_name' -> 'myVarName').",
        "def snake_to_camel(s):\n    head, *rest = s.split('_')\n    return head + ''.join(w.capitalize() for w in rest)\n",
        [
            "snake_to_camel('my_var_name') == 'myVarName'",
            "snake_to_camel('x') == 'x'",
            "snake_to_camel('a_b') == 'aB'",
        ],
    ),
    (
        "camel_to_snake",
        "camel_to_snake(s: str) -> str",
        "Convert camelCase to snake_case ('myVarName' -> 'my_var_name').",
        "def camel_to_snake(s):\n    return ''.join('_' + c.lower() if c.isupper() else c for c in s)\n",
        [
            "camel_to_snake('myVarName') == 'my_var_name'",
            "camel_to_snake('x') == 'x'",
            "camel_to_snake('aB') == 'a_b'",
        ],
    ),
    (
        "missing_number",
        "missing_number(nums: list[int]) -> int",
        "nums holds n distinct numbers from 0..n; return the one that is missing.",
        "def missing_number(nums):\n    n = len(nums)\n    return n * (n + 1) // 2 - sum(nums)\n",
        [
            "missing_number([3, 0, 1]) == 2",
            "missing_number([0, 1]) == 2",
            "missing_number([1]) == 0",
            "missing_number([]) == 0",
        ],
    ),
    (
        "single_number",
        "single_number(nums: list[int]) -> int",
        "Every value in nums appears twice except one; return that one.",
        "def single_number(nums):\n    out = 0\n    for x in nums:\n        out ^= x\n    return out\n",
        [
            "single_number([2, 2, 1]) == 1",
            "single_number([4, 1, 2, 1, 2]) == 4",
            "single_number([7]) == 7",
        ],
    ),
    (
        "climb_stairs",
        "climb_stairs(n: int) -> int",
        "Return how many ways there are to climb n steps taking 1 or 2 steps at a time.",
        "def climb_stairs(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
        [
            "climb_stairs(1) == 1",
            "climb_stairs(2) == 2",
            "climb_stairs(5) == 8",
            "climb_stairs(0) == 1",
            "climb_stairs(40) == 165580141",
        ],
    ),
    (
        "coin_change",
        "coin_change(coins: list[int], amount: int) -> int",
        "Return the fewest coins summing to amount, or -1 if impossible.",
        "def coin_change(coins, amount):\n    inf = float('inf')\n    best = [0] + [inf] * amount\n    for a in range(1, amount + 1):\n        for c in coins:\n            if c <= a and best[a - c] + 1 < best[a]:\n                best[a] = best[a - c] + 1\n    return best[amount] if best[amount] != inf else -1\n",
        [
            "coin_change([1, 2, 5], 11) == 3",
            "coin_change([2], 3) == -1",
            "coin_change([1], 0) == 0",
            "coin_change([186, 419, 83, 408], 6249) == 20",
        ],
    ),
    (
        "edit_distance",
        "edit_distance(a: str, b: str) -> int",
        "Return the Levenshtein distance (insertions, deletions, substitutions) between a and b.",
        "def edit_distance(a, b):\n    prev = list(range(len(b) + 1))\n    for i, ca in enumerate(a, 1):\n        cur = [i]\n        for j, cb in enumerate(b, 1):\n            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))\n        prev = cur\n    return prev[-1]\n",
        [
            "edit_distance('kitten', 'sitting') == 3",
            "edit_distance('', 'abc') == 3",
            "edit_distance('same', 'same') == 0",
            "edit_distance('intention', 'execution') == 5",
        ],
    ),
    (
        "lis_length",
        "lis_length(nums: list[int]) -> int",
        "Return the length of the longest strictly increasing subsequence.",
        "import bisect\n\ndef lis_length(nums):\n    tails = []\n    for x in nums:\n        i = bisect.bisect_left(tails, x)\n        tails[i:i + 1] = [x]\n    return len(tails)\n",
        [
            "lis_length([10, 9, 2, 5, 3, 7, 101, 18]) == 4",
            "lis_length([]) == 0",
            "lis_length([7, 7, 7]) == 1",
            "lis_length([0, 1, 0, 3, 2, 3]) == 4",
        ],
    ),
    (
        "group_anagrams",
        "group_anagrams(words: list[str]) -> list[list[str]]",
        "Group words that are anagrams of each other; each group keeps input order and groups are ordered by first appearance.",
        "def group_anagrams(words):\n    groups = {}\n    for w in words:\n        groups.setdefault(''.join(sorted(w)), []).append(w)\n    return list(groups.values())\n",
        [
            "group_anagrams(['eat', 'tea', 'tan', 'ate', 'nat', 'bat']) == [['eat', 'tea', 'ate'], ['tan', 'nat'], ['bat']]",
            "group_anagrams([]) == []",
            "group_anagrams(['a']) == [['a']]",
        ],
    ),
    (
        "top_k_frequent",
        "top_k_frequent(nums: list[int], k: int) -> list[int]",
        "Return the k most frequent values, most frequent first; ties broken by the smaller value first.",
        "from collections import Counter\n\ndef top_k_frequent(nums, k):\n    counts = Counter(nums)\n    return sorted(counts, key=lambda x: (-counts[x], x))[:k]\n",
        [
            "top_k_frequent([1, 1, 1, 2, 2, 3], 2) == [1, 2]",
            "top_k_frequent([1], 1) == [1]",
            "top_k_frequent([4, 4, 5, 5, 6], 2) == [4, 5]",
        ],
    ),
    (
        "spiral_order",
        "spiral_order(matrix: list[list[int]]) -> list[int]",
        "Return the elements of the matrix in clockwise spiral order.",
        "def spiral_order(matrix):\n    out = []\n    m = [list(r) for r in matrix]\n    while m:\n        out += m.pop(0)\n        m = [list(r) for r in zip(*m)][::-1]\n    return out\n",
        [
            "spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [1, 2, 3, 6, 9, 8, 7, 4, 5]",
            "spiral_order([]) == []",
            "spiral_order([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]) == [1, 2, 3, 4, 8, 12, 11, 10, 9, 5, 6, 7]",
        ],
    ),
    (
        "is_power_of_two",
        "is_power_of_two(n: int) -> bool",
        "Return True if n is a power of two (1, 2, 4, …).",
        "def is_power_of_two(n):\n    return n > 0 and n & (n - 1) == 0\n",
        [
            "is_power_of_two(1) is True",
            "is_power_of_two(16) is True",
            "is_power_of_two(18) is False",
            "is_power_of_two(0) is False",
            "is_power_of_two(-8) is False",
        ],
    ),
    (
        "to_binary",
        "to_binary(n: int) -> str",
        "Return the binary representation of n >= 0 without a prefix.",
        "def to_binary(n):\n    return format(n, 'b')\n",
        ["to_binary(0) == '0'", "to_binary(5) == '101'", "to_binary(255) == '11111111'"],
    ),
    (
        "hamming_distance",
        "hamming_distance(a: str, b: str) -> int",
        "Return the number of positions at which two equal-length strings differ.",
        "def hamming_distance(a, b):\n    return sum(x != y for x, y in zip(a, b))\n",
        [
            "hamming_distance('karolin', 'kathrin') == 3",
            "hamming_distance('', '') == 0",
            "hamming_distance('abc', 'abc') == 0",
        ],
    ),
    (
        "median",
        "median(nums: list[float]) -> float",
        "Return the median of a non-empty list (mean of the two middle values for even length).",
        "def median(nums):\n    s = sorted(nums)\n    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n",
        [
            "median([3, 1, 2]) == 2",
            "median([4, 1, 3, 2]) == 2.5",
            "median([5]) == 5",
            "median([-1, -3]) == -2",
        ],
    ),
    (
        "mode",
        "mode(nums: list[int]) -> int",
        "Return the most common value; on a tie, the smallest of the tied values.",
        "from collections import Counter\n\ndef mode(nums):\n    counts = Counter(nums)\n    return min(counts, key=lambda x: (-counts[x], x))\n",
        ["mode([1, 2, 2, 3]) == 2", "mode([3, 3, 1, 1]) == 1", "mode([7]) == 7"],
    ),
    (
        "nth_prime",
        "nth_prime(n: int) -> int",
        "Return the n-th prime number (nth_prime(1) == 2).",
        "def nth_prime(n):\n    count, k = 0, 1\n    while count < n:\n        k += 1\n        if all(k % p for p in range(2, int(k ** 0.5) + 1)):\n            count += 1\n    return k\n",
        [
            "nth_prime(1) == 2",
            "nth_prime(6) == 13",
            "nth_prime(100) == 541",
            "nth_prime(1000) == 7919",
        ],
    ),
    (
        "compress_ranges",
        "compress_ranges(nums: list[int]) -> list[str]",
        "Summarise sorted distinct integers as ranges: [0,1,2,4,5,7] -> ['0->2', '4->5', '7'].",
        "def compress_ranges(nums):\n    out = []\n    i = 0\n    while i < len(nums):\n        j = i\n        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:\n            j += 1\n        out.append(str(nums[i]) if i == j else f'{nums[i]}->{nums[j]}')\n        i = j + 1\n    return out\n",
        [
            "compress_ranges([0, 1, 2, 4, 5, 7]) == ['0->2', '4->5', '7']",
            "compress_ranges([]) == []",
            "compress_ranges([3]) == ['3']",
            "compress_ranges([-2, -1, 5]) == ['-2->-1', '5']",
        ],
    ),
    (
        "parse_key_values",
        "parse_key_values(s: str) -> dict[str, str]",
        "Parse 'k1=v1;k2=v2' into a dict; skip empty segments; whitespace around keys and values is stripped.",
        "def parse_key_values(s):\n    out = {}\n    for part in s.split(';'):\n        if part.strip():\n            k, _, v = part.partition('=')\n            out[k.strip()] = v.strip()\n    return out\n",
        [
            "parse_key_values('a=1;b=2') == {'a': '1', 'b': '2'}",
            "parse_key_values('') == {}",
            "parse_key_values(' x = y ;;') == {'x': 'y'}",
        ],
    ),
    (
        "count_islands",
        "count_islands(grid: list[str]) -> int",
        "grid rows are strings of '1' (land) and '0' (water); return the number of 4-connected islands.",
        "def count_islands(grid):\n    seen = set()\n    rows, cols = len(grid), len(grid[0]) if grid else 0\n    count = 0\n    for r in range(rows):\n        for c in range(cols):\n            if grid[r][c] == '1' and (r, c) not in seen:\n                count += 1\n                stack = [(r, c)]\n                seen.add((r, c))\n                while stack:\n                    y, x = stack.pop()\n                    for ny, nx in ((y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)):\n                        if 0 <= ny < rows and 0 <= nx < cols and grid[ny][nx] == '1' and (ny, nx) not in seen:\n                            seen.add((ny, nx))\n                            stack.append((ny, nx))\n    return count\n",
        [
            "count_islands(['11000', '11000', '00100', '00011']) == 3",
            "count_islands([]) == 0",
            "count_islands(['0']) == 0",
            "count_islands(['101', '010', '101']) == 5",
        ],
    ),
    (
        "stable_sort_by_length",
        "stable_sort_by_length(words: list[str]) -> list[str]",
        "Sort words by length, keeping the input order of equal-length words.",
        "def stable_sort_by_length(words):\n    return sorted(words, key=len)\n",
        [
            "stable_sort_by_length(['ccc', 'a', 'bb', 'd']) == ['a', 'd', 'bb', 'ccc']",
            "stable_sort_by_length([]) == []",
        ],
    ),
]


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    names = [p[0] for p in PROBLEMS]
    if len(set(names)) != len(names):
        raise SystemExit("duplicate entry points")
    with OUT.open("w", encoding="utf-8") as fh:
        for index, (entry_point, signature, description, reference, tests) in enumerate(PROBLEMS):
            row = {
                "id": f"pc-{index:03d}-{entry_point}",
                "entry_point": entry_point,
                "signature": signature,
                "description": description,
                "tests": [f"assert {t}" for t in tests],
                "reference": reference,
            }
            fh.write(json.dumps(row) + "\n")
    print(f"wrote {len(PROBLEMS)} problems to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
