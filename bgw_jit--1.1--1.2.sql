/* bgw_jit--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION bgw_jit UPDATE TO '1.2'" to load this file. \quit

-- 1.2 adds monitoring objects; the objects of 1.1 are unchanged.  Whatever
-- is added here must be created exactly as bgw_jit--1.2.sql creates it
-- (the regression test compares an updated install with a fresh one).
