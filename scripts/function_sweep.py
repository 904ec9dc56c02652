#!/usr/bin/env python3
"""Calls each MySQL 8.0 built-in function and operator once against a running
server and lists those it refuses as unknown or unsupported (issue 24, item
12's sweep). The list follows the MySQL 8.0 manual's function and operator
index ("Built-In Function and Operator Reference"); each entry is one call
with arguments MySQL accepts. Spatial (ST_*, MBR*, geometry constructors),
XML (ExtractValue, UpdateXML), replication (GTID_*, *_POS_WAIT) and
internal (INTERNAL_*, GET_DD_*) functions are called as one group each.

    python3 scripts/function_sweep.py --port 3306 [--user root] [--password pw]

Prints one line per refused call (`name<TAB>code<TAB>message`) and a count;
other errors (wrong arguments for our sample, say) are listed apart, as they
may mean the sample is wrong rather than the function missing. Needs PyMySQL
(tests/python/.venv has it).
"""
import argparse
import sys

import pymysql

# (name, SQL expression calling it). Table-free: each runs as SELECT <expr>.
CALLS = [
    ("ABS", "ABS(-1)"), ("ACOS", "ACOS(1)"), ("ADDDATE", "ADDDATE('2024-01-01', 1)"),
    ("ADDDATE INTERVAL", "ADDDATE('2024-01-01', INTERVAL 1 DAY)"),
    ("ADDTIME", "ADDTIME('01:00:00', '00:30:00')"),
    ("AES_DECRYPT", "AES_DECRYPT(AES_ENCRYPT('a', 'k'), 'k')"), ("AES_ENCRYPT", "AES_ENCRYPT('a', 'k')"),
    ("ANY_VALUE", "ANY_VALUE(1)"), ("ASCII", "ASCII('a')"), ("ASIN", "ASIN(0)"), ("ATAN", "ATAN(1)"),
    ("ATAN2", "ATAN2(1, 1)"), ("ATAN 2 args", "ATAN(1, 1)"), ("AVG", "AVG(1)"), ("BENCHMARK", "BENCHMARK(1, 1)"),
    ("BETWEEN", "2 BETWEEN 1 AND 3"), ("BIN", "BIN(5)"), ("BIN_TO_UUID", "BIN_TO_UUID(UUID_TO_BIN(UUID()))"),
    ("BINARY", "BINARY 'a'"), ("BIT_AND", "BIT_AND(3)"), ("BIT_COUNT", "BIT_COUNT(7)"),
    ("BIT_LENGTH", "BIT_LENGTH('a')"), ("BIT_OR", "BIT_OR(3)"), ("BIT_XOR", "BIT_XOR(3)"),
    ("&", "3 & 1"), ("|", "3 | 4"), ("^", "3 ^ 1"), ("~", "~0"), ("<<", "1 << 3"), (">>", "8 >> 1"),
    ("CASE", "CASE 1 WHEN 1 THEN 'a' ELSE 'b' END"), ("CAST", "CAST('1' AS SIGNED)"),
    ("CEIL", "CEIL(1.5)"), ("CEILING", "CEILING(1.5)"), ("CHAR", "CHAR(65)"), ("CHAR USING", "CHAR(65 USING utf8mb4)"),
    ("CHAR_LENGTH", "CHAR_LENGTH('ab')"), ("CHARACTER_LENGTH", "CHARACTER_LENGTH('ab')"),
    ("CHARSET", "CHARSET('a')"), ("COALESCE", "COALESCE(NULL, 1)"), ("COERCIBILITY", "COERCIBILITY('a')"),
    ("COLLATION", "COLLATION('a')"), ("COMPRESS", "COMPRESS('aaaa')"), ("CONCAT", "CONCAT('a', 'b')"),
    ("CONCAT_WS", "CONCAT_WS(',', 'a', 'b')"), ("CONNECTION_ID", "CONNECTION_ID()"), ("CONV", "CONV('a', 16, 10)"),
    ("CONVERT", "CONVERT('1', SIGNED)"), ("CONVERT USING", "CONVERT('a' USING utf8mb4)"),
    ("CONVERT_TZ", "CONVERT_TZ('2024-01-01 00:00:00', '+00:00', '+01:00')"), ("COS", "COS(0)"), ("COT", "COT(1)"),
    ("COUNT", "COUNT(1)"), ("COUNT DISTINCT", "COUNT(DISTINCT 1)"), ("CRC32", "CRC32('a')"),
    ("CUME_DIST", "CUME_DIST() OVER ()"), ("CURDATE", "CURDATE()"), ("CURRENT_DATE", "CURRENT_DATE()"),
    ("CURRENT_ROLE", "CURRENT_ROLE()"), ("CURRENT_TIME", "CURRENT_TIME()"),
    ("CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP()"), ("CURRENT_USER", "CURRENT_USER()"), ("CURTIME", "CURTIME()"),
    ("DATABASE", "DATABASE()"), ("DATE", "DATE('2024-01-02 03:04:05')"),
    ("DATE_ADD", "DATE_ADD('2024-01-01', INTERVAL 1 DAY)"), ("DATE_FORMAT", "DATE_FORMAT('2024-01-01', '%Y')"),
    ("DATE_SUB", "DATE_SUB('2024-01-01', INTERVAL 1 DAY)"), ("DATEDIFF", "DATEDIFF('2024-01-02', '2024-01-01')"),
    ("DAY", "DAY('2024-01-02')"), ("DAYNAME", "DAYNAME('2024-01-02')"), ("DAYOFMONTH", "DAYOFMONTH('2024-01-02')"),
    ("DAYOFWEEK", "DAYOFWEEK('2024-01-02')"), ("DAYOFYEAR", "DAYOFYEAR('2024-01-02')"),
    ("DEGREES", "DEGREES(PI())"), ("DENSE_RANK", "DENSE_RANK() OVER ()"), ("DIV", "7 DIV 2"),
    ("ELT", "ELT(1, 'a', 'b')"), ("EXP", "EXP(1)"), ("EXPORT_SET", "EXPORT_SET(5, 'Y', 'N', ',', 4)"),
    ("EXTRACT", "EXTRACT(YEAR FROM '2024-01-02')"), ("EXTRACT WEEK", "EXTRACT(WEEK FROM '2024-01-02')"),
    ("FIELD", "FIELD('b', 'a', 'b')"), ("FIND_IN_SET", "FIND_IN_SET('b', 'a,b')"),
    ("FIRST_VALUE", "FIRST_VALUE(1) OVER ()"), ("FLOOR", "FLOOR(1.5)"), ("FORMAT", "FORMAT(1234.5, 1)"),
    ("FORMAT_BYTES", "FORMAT_BYTES(1024)"), ("FORMAT_PICO_TIME", "FORMAT_PICO_TIME(1000000)"),
    ("FOUND_ROWS", "FOUND_ROWS()"), ("FROM_BASE64", "FROM_BASE64('YQ==')"), ("FROM_DAYS", "FROM_DAYS(739000)"),
    ("FROM_UNIXTIME", "FROM_UNIXTIME(0)"), ("GET_FORMAT", "GET_FORMAT(DATE, 'ISO')"),
    ("GET_LOCK", "GET_LOCK('sweep', 0)"), ("GREATEST", "GREATEST(1, 2)"), ("GROUP_CONCAT", "GROUP_CONCAT(1)"),
    ("GROUPING", "(SELECT GROUPING(a) FROM (SELECT 1 AS a) t GROUP BY a WITH ROLLUP LIMIT 1)"),
    ("HEX", "HEX(255)"), ("HOUR", "HOUR('10:11:12')"), ("ICU_VERSION", "ICU_VERSION()"), ("IF", "IF(1, 'a', 'b')"),
    ("IFNULL", "IFNULL(NULL, 1)"), ("IN", "1 IN (1, 2)"), ("INET_ATON", "INET_ATON('10.0.0.1')"),
    ("INET_NTOA", "INET_NTOA(167772161)"), ("INET6_ATON", "INET6_ATON('::1')"),
    ("INET6_NTOA", "INET6_NTOA(INET6_ATON('::1'))"), ("INSERT", "INSERT('abc', 2, 1, 'x')"),
    ("INSTR", "INSTR('abc', 'b')"), ("INTERVAL", "INTERVAL(5, 1, 10)"), ("IS", "1 IS TRUE"),
    ("IS NULL", "NULL IS NULL"), ("IS_FREE_LOCK", "IS_FREE_LOCK('sweep2')"), ("IS_IPV4", "IS_IPV4('10.0.0.1')"),
    ("IS_IPV4_COMPAT", "IS_IPV4_COMPAT(INET6_ATON('::10.0.5.9'))"),
    ("IS_IPV4_MAPPED", "IS_IPV4_MAPPED(INET6_ATON('::ffff:10.0.5.9'))"), ("IS_IPV6", "IS_IPV6('::1')"),
    ("IS_USED_LOCK", "IS_USED_LOCK('sweep2')"), ("IS_UUID", "IS_UUID(UUID())"), ("ISNULL", "ISNULL(NULL)"),
    ("JSON_ARRAY", "JSON_ARRAY(1)"), ("JSON_ARRAY_APPEND", "JSON_ARRAY_APPEND('[1]', '$', 2)"),
    ("JSON_ARRAY_INSERT", "JSON_ARRAY_INSERT('[1]', '$[0]', 2)"), ("JSON_ARRAYAGG", "JSON_ARRAYAGG(1)"),
    ("JSON_CONTAINS", "JSON_CONTAINS('[1]', '1')"), ("JSON_CONTAINS_PATH", "JSON_CONTAINS_PATH('{\"a\":1}', 'one', '$.a')"),
    ("JSON_DEPTH", "JSON_DEPTH('[1]')"), ("JSON_EXTRACT", "JSON_EXTRACT('[1]', '$[0]')"),
    ("->", "(SELECT j->'$.a' FROM (SELECT CAST('{\"a\":1}' AS JSON) AS j) t)"),
    ("->>", "(SELECT j->>'$.a' FROM (SELECT CAST('{\"a\":1}' AS JSON) AS j) t)"),
    ("JSON_INSERT", "JSON_INSERT('{}', '$.a', 1)"), ("JSON_KEYS", "JSON_KEYS('{\"a\":1}')"),
    ("JSON_LENGTH", "JSON_LENGTH('[1]')"), ("JSON_MERGE", "JSON_MERGE('[1]', '[2]')"),
    ("JSON_MERGE_PATCH", "JSON_MERGE_PATCH('{}', '{\"a\":1}')"), ("JSON_MERGE_PRESERVE", "JSON_MERGE_PRESERVE('[1]', '[2]')"),
    ("JSON_OBJECT", "JSON_OBJECT('a', 1)"), ("JSON_OBJECTAGG", "JSON_OBJECTAGG('a', 1)"),
    ("JSON_OVERLAPS", "JSON_OVERLAPS('[1]', '[1,2]')"), ("JSON_PRETTY", "JSON_PRETTY('[1]')"),
    ("JSON_QUOTE", "JSON_QUOTE('a')"), ("JSON_REMOVE", "JSON_REMOVE('[1,2]', '$[0]')"),
    ("JSON_REPLACE", "JSON_REPLACE('{\"a\":1}', '$.a', 2)"),
    ("JSON_SCHEMA_VALID", "JSON_SCHEMA_VALID('{\"type\":\"number\"}', '1')"),
    ("JSON_SCHEMA_VALIDATION_REPORT", "JSON_SCHEMA_VALIDATION_REPORT('{\"type\":\"number\"}', '1')"),
    ("JSON_SEARCH", "JSON_SEARCH('[\"a\"]', 'one', 'a')"), ("JSON_SET", "JSON_SET('{}', '$.a', 1)"),
    ("JSON_STORAGE_FREE", "JSON_STORAGE_FREE('[1]')"), ("JSON_STORAGE_SIZE", "JSON_STORAGE_SIZE('[1]')"),
    ("JSON_TABLE", "(SELECT x FROM JSON_TABLE('[1]', '$[*]' COLUMNS (x INT PATH '$')) jt)"),
    ("JSON_TYPE", "JSON_TYPE('[1]')"), ("JSON_UNQUOTE", "JSON_UNQUOTE('\"a\"')"), ("JSON_VALID", "JSON_VALID('[1]')"),
    ("JSON_VALUE", "JSON_VALUE('{\"a\":1}', '$.a')"), ("LAG", "LAG(1) OVER ()"), ("LAST_DAY", "LAST_DAY('2024-02-01')"),
    ("LAST_INSERT_ID", "LAST_INSERT_ID()"), ("LAST_VALUE", "LAST_VALUE(1) OVER ()"), ("LCASE", "LCASE('A')"),
    ("LEAD", "LEAD(1) OVER ()"), ("LEAST", "LEAST(1, 2)"), ("LEFT", "LEFT('abc', 1)"), ("LENGTH", "LENGTH('abc')"),
    ("LIKE", "'abc' LIKE 'a%'"), ("LN", "LN(1)"), ("LOAD_FILE", "LOAD_FILE('/nonexistent')"),
    ("LOCALTIME", "LOCALTIME()"), ("LOCALTIMESTAMP", "LOCALTIMESTAMP()"), ("LOCATE", "LOCATE('b', 'abc')"),
    ("LOG", "LOG(10)"), ("LOG10", "LOG10(10)"), ("LOG2", "LOG2(8)"), ("LOWER", "LOWER('A')"),
    ("LPAD", "LPAD('a', 3, 'x')"), ("LTRIM", "LTRIM('  a')"), ("MAKE_SET", "MAKE_SET(3, 'a', 'b', 'c')"),
    ("MAKEDATE", "MAKEDATE(2024, 32)"), ("MAKETIME", "MAKETIME(1, 2, 3)"), ("MAX", "MAX(1)"),
    ("MD5", "MD5('a')"), ("MEMBER OF", "1 MEMBER OF('[1,2]')"), ("MICROSECOND", "MICROSECOND('12:00:00.5')"),
    ("MID", "MID('abc', 2, 1)"), ("MIN", "MIN(1)"), ("MINUTE", "MINUTE('10:11:12')"), ("MOD", "MOD(7, 2)"),
    ("%", "7 % 2"), ("MONTH", "MONTH('2024-03-01')"), ("MONTHNAME", "MONTHNAME('2024-03-01')"),
    ("NAME_CONST", "NAME_CONST('x', 1)"), ("NOT", "NOT 1"), ("NOW", "NOW()"), ("NTH_VALUE", "NTH_VALUE(1, 1) OVER ()"),
    ("NTILE", "NTILE(2) OVER ()"), ("NULLIF", "NULLIF(1, 1)"), ("OCT", "OCT(8)"), ("OCTET_LENGTH", "OCTET_LENGTH('a')"),
    ("ORD", "ORD('a')"), ("PERCENT_RANK", "PERCENT_RANK() OVER ()"), ("PERIOD_ADD", "PERIOD_ADD(202401, 1)"),
    ("PERIOD_DIFF", "PERIOD_DIFF(202402, 202401)"), ("PI", "PI()"), ("POSITION", "POSITION('b' IN 'abc')"),
    ("POW", "POW(2, 3)"), ("POWER", "POWER(2, 3)"), ("PS_CURRENT_THREAD_ID", "PS_CURRENT_THREAD_ID()"),
    ("PS_THREAD_ID", "PS_THREAD_ID(CONNECTION_ID())"), ("QUARTER", "QUARTER('2024-05-01')"),
    ("QUOTE", "QUOTE('a')"), ("RADIANS", "RADIANS(180)"), ("RAND", "RAND()"), ("RANDOM_BYTES", "RANDOM_BYTES(4)"),
    ("RANK", "RANK() OVER ()"), ("REGEXP", "'abc' REGEXP 'b'"), ("REGEXP_INSTR", "REGEXP_INSTR('abc', 'b')"),
    ("REGEXP_LIKE", "REGEXP_LIKE('abc', 'b')"), ("REGEXP_REPLACE", "REGEXP_REPLACE('abc', 'b', 'x')"),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('abc', 'b')"), ("RELEASE_ALL_LOCKS", "RELEASE_ALL_LOCKS()"),
    ("RELEASE_LOCK", "RELEASE_LOCK('sweep')"), ("REPEAT", "REPEAT('a', 2)"), ("REPLACE", "REPLACE('abc', 'b', 'x')"),
    ("REVERSE", "REVERSE('abc')"), ("RIGHT", "RIGHT('abc', 1)"), ("RLIKE", "'abc' RLIKE 'b'"),
    ("ROLES_GRAPHML", "ROLES_GRAPHML()"), ("ROUND", "ROUND(1.5)"), ("ROW_COUNT", "ROW_COUNT()"),
    ("ROW_NUMBER", "ROW_NUMBER() OVER ()"), ("RPAD", "RPAD('a', 3, 'x')"), ("RTRIM", "RTRIM('a  ')"),
    ("SCHEMA", "SCHEMA()"), ("SEC_TO_TIME", "SEC_TO_TIME(61)"), ("SECOND", "SECOND('10:11:12')"),
    ("SESSION_USER", "SESSION_USER()"), ("SHA", "SHA('a')"), ("SHA1", "SHA1('a')"), ("SHA2", "SHA2('a', 256)"),
    ("SIGN", "SIGN(-2)"), ("SIN", "SIN(0)"), ("SLEEP", "SLEEP(0)"), ("SOUNDEX", "SOUNDEX('Robert')"),
    ("SOUNDS LIKE", "'Robert' SOUNDS LIKE 'Rupert'"), ("SPACE", "SPACE(2)"), ("SQRT", "SQRT(4)"),
    ("STATEMENT_DIGEST", "STATEMENT_DIGEST('SELECT 1')"), ("STATEMENT_DIGEST_TEXT", "STATEMENT_DIGEST_TEXT('SELECT 1')"),
    ("STD", "STD(1)"), ("STDDEV", "STDDEV(1)"), ("STDDEV_POP", "STDDEV_POP(1)"), ("STDDEV_SAMP", "STDDEV_SAMP(1)"),
    ("STR_TO_DATE", "STR_TO_DATE('01/02/2024', '%m/%d/%Y')"), ("STRCMP", "STRCMP('a', 'b')"),
    ("SUBDATE", "SUBDATE('2024-01-02', 1)"), ("SUBDATE INTERVAL", "SUBDATE('2024-01-02', INTERVAL 1 DAY)"),
    ("SUBSTR", "SUBSTR('abc', 2)"), ("SUBSTRING", "SUBSTRING('abc', 2, 1)"), ("SUBSTRING FROM", "SUBSTRING('abc' FROM 2)"),
    ("SUBSTRING_INDEX", "SUBSTRING_INDEX('a.b.c', '.', 2)"), ("SUBTIME", "SUBTIME('01:00:00', '00:30:00')"),
    ("SUM", "SUM(1)"), ("SYSDATE", "SYSDATE()"), ("SYSTEM_USER", "SYSTEM_USER()"), ("TAN", "TAN(0)"),
    ("TIME", "TIME('2024-01-01 10:11:12')"), ("TIME_FORMAT", "TIME_FORMAT('10:11:12', '%H')"),
    ("TIME_TO_SEC", "TIME_TO_SEC('00:01:01')"), ("TIMEDIFF", "TIMEDIFF('10:00:00', '09:00:00')"),
    ("TIMESTAMP", "TIMESTAMP('2024-01-01')"), ("TIMESTAMP 2 args", "TIMESTAMP('2024-01-01', '01:00:00')"),
    ("TIMESTAMPADD", "TIMESTAMPADD(DAY, 1, '2024-01-01')"),
    ("TIMESTAMPDIFF", "TIMESTAMPDIFF(DAY, '2024-01-01', '2024-01-03')"), ("TO_BASE64", "TO_BASE64('a')"),
    ("TO_DAYS", "TO_DAYS('2024-01-01')"), ("TO_SECONDS", "TO_SECONDS('2024-01-01')"), ("TRIM", "TRIM('  a ')"),
    ("TRIM FROM", "TRIM(LEADING 'x' FROM 'xxa')"), ("TRUNCATE", "TRUNCATE(1.55, 1)"), ("UCASE", "UCASE('a')"),
    ("UNCOMPRESS", "UNCOMPRESS(COMPRESS('aaaa'))"), ("UNCOMPRESSED_LENGTH", "UNCOMPRESSED_LENGTH(COMPRESS('aaaa'))"),
    ("UNHEX", "UNHEX('41')"), ("UNIX_TIMESTAMP", "UNIX_TIMESTAMP('2024-01-01')"), ("UPPER", "UPPER('a')"),
    ("USER", "USER()"), ("UTC_DATE", "UTC_DATE()"), ("UTC_TIME", "UTC_TIME()"), ("UTC_TIMESTAMP", "UTC_TIMESTAMP()"),
    ("UUID", "UUID()"), ("UUID_SHORT", "UUID_SHORT()"), ("UUID_TO_BIN", "UUID_TO_BIN(UUID())"),
    ("VALIDATE_PASSWORD_STRENGTH", "VALIDATE_PASSWORD_STRENGTH('abc')"), ("VAR_POP", "VAR_POP(1)"),
    ("VAR_SAMP", "VAR_SAMP(1)"), ("VARIANCE", "VARIANCE(1)"), ("VERSION", "VERSION()"), ("WEEK", "WEEK('2024-01-10')"),
    ("WEEKDAY", "WEEKDAY('2024-01-10')"), ("WEEKOFYEAR", "WEEKOFYEAR('2024-01-10')"),
    ("WEIGHT_STRING", "WEIGHT_STRING('a')"), ("XOR", "1 XOR 0"), ("YEAR", "YEAR('2024-01-10')"),
    ("YEARWEEK", "YEARWEEK('2024-01-10')"), ("<=>", "NULL <=> NULL"),
    # Groups: one representative call each.
    ("spatial (ST_*, MBR*, geometry constructors)", "ST_AsText(ST_GeomFromText('POINT(1 1)'))"),
    ("XML (ExtractValue, UpdateXML)", "ExtractValue('<a>b</a>', '/a')"),
    ("replication (GTID_SUBSET, GTID_SUBTRACT, SOURCE_POS_WAIT, WAIT_FOR_EXECUTED_GTID_SET)", "GTID_SUBSET('', '')"),
    ("full-text MATCH ... AGAINST", "(SELECT MATCH(a) AGAINST ('x') FROM (SELECT 'x' AS a) t)"),
]

# Error codes that mean "this function or operator is not there".
MISSING = {1305, 1235, 1064, 1582, 1583, 1584, 1149}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=3306)
    ap.add_argument("--user", default="root")
    ap.add_argument("--password", default="")
    args = ap.parse_args()
    def connect():
        return pymysql.connect(host=args.host, port=args.port, user=args.user, password=args.password,
                               autocommit=True)

    conn = connect()
    missing, other = [], []
    for name, expr in CALLS:
        cur = conn.cursor()
        try:
            cur.execute(f"SELECT {expr}")
            cur.fetchall()
        except pymysql.err.MySQLError as e:
            code = e.args[0]
            msg = e.args[1] if len(e.args) > 1 else ""
            (missing if code in MISSING else other).append((name, code, msg))
        except Exception as e:  # a result the driver cannot read is a finding too
            other.append((name, "client", repr(e)))
            conn = connect()
            continue
        cur.close()
    for name, code, msg in missing:
        print(f"{name}\t{code}\t{msg}")
    print(f"-- {len(missing)} of {len(CALLS)} calls refused as missing")
    if other:
        print("-- other errors (check the sample call):")
        for name, code, msg in other:
            print(f"{name}\t{code}\t{msg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
